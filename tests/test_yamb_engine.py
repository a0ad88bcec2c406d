"""The batched Yamb engine against the reference rules: scoring, fill orders, announcements."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yamblab.errors import IllegalActionError
from yamblab.games.yamb.rules import PRESETS, get_preset
from yamblab.games.yamb.scoring import card_total, column_parts, legal_boxes, row_score
from yamblab.games.yamb.engine import YambBatch, new_yamb_batch, play_random

CRO = get_preset("croatian")


def _reference_placements(b, i):
    r = b.rules
    ann = int(b.announced[i])
    boxes = legal_boxes(r, b.card[i].tolist(), int(b.rolls_used[i]), None if ann < 0 else ann,
                        pure=bool(b.pure[i]))
    return {c * r.n_rows + row for c, row in boxes}


def _compulsory(b, i):
    """Whether announcing is compulsory in game i now (the engine then refuses placements)."""
    r = b.rules
    if int(b.rolls_used[i]) != 1 or int(b.announced[i]) >= 0 or r.announce_column < 0:
        return False
    card = b.card[i]
    if r.announce_compulsory == "always":
        return bool((card[r.announce_column] < 0).any())
    rest = [c for c, k in enumerate(r.columns) if k not in ("announce", "hand")]
    return not (card[rest] < 0).any()


@pytest.mark.parametrize("preset", list(PRESETS))
def test_random_play_matches_reference_step_by_step(preset):
    r = get_preset(preset)
    b = new_yamb_batch(12, r, seed=7)
    step = 0
    prev_act = np.full(b.n, -1)
    while not b.done.all():
        legal = b.legal_actions()
        acts = b.core.random_actions(99, step)
        dice = b.dice.copy()
        ru = b.rolls_used.copy()
        for i in range(b.n):
            if b.done[i]:
                continue
            placements = set(np.flatnonzero(legal[i, :b.n_placements]).tolist())
            ref = _reference_placements(b, i)
            # The engine may refuse a placement the order allows only when announcing is compulsory.
            assert placements <= ref
            if not _compulsory(b, i):
                assert placements == ref
            # The pure flag: set by the first roll and by a reroll of every die (hold mask 0).
            if int(b.rolls_used[i]) == 1:
                assert b.pure[i] == 1
            elif step and prev_act[i] >= b.hold_offset and prev_act[i] < b.announce_offset:
                assert b.pure[i] == (prev_act[i] == b.hold_offset)
        b.step(acts)
        for i in np.flatnonzero(acts < b.n_placements):
            if acts[i] < 0:
                continue
            c, row = divmod(int(acts[i]), r.n_rows)
            assert b.card[i, c, row] == row_score(r, row, dice[i].tolist(), int(ru[i]))
        prev_act = acts
        step += 1
    assert (b.card >= 0).all()
    for i in range(b.n):
        assert b.total[i] == card_total(r, b.card[i].tolist())


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**63), preset=st.sampled_from(list(PRESETS)))
def test_property_random_play_ends_full_with_total_equal_to_parts(seed, preset):
    r = get_preset(preset)
    b = play_random(r, 8, seed=seed)
    assert b.done.all() and (b.card >= 0).all()
    assert (b.turn == r.n_turns).all()
    for i in range(b.n):
        parts = [column_parts(r, col) for col in b.card[i].tolist()]
        assert b.total[i] == sum(p["upper"] + p["bonus"] + p["middle"] + p["lower"] for p in parts)
        assert b.col_total[i].tolist() == [p["total"] for p in parts]


def test_same_seed_same_dice_and_game_numbers():
    a = new_yamb_batch(5, CRO, seed=3)
    b = new_yamb_batch(5, CRO, seed=3)
    c = new_yamb_batch(3, CRO, seed=3, first_game=2)
    assert np.array_equal(a.dice, b.dice) and np.array_equal(a.dice[2:], c.dice)
    assert not np.array_equal(a.dice, new_yamb_batch(5, CRO, seed=4).dice)


def test_start_position_fill_orders():
    r = get_preset("seven_column")
    b = new_yamb_batch(1, r, seed=0)
    legal = b.legal_actions()[0]
    R = r.n_rows
    placed = {(a // R, a % R) for a in np.flatnonzero(legal[:b.n_placements])}
    cols = {k: r.columns.index(k) for k in r.columns}
    assert {row for c, row in placed if c == cols["down"]} == {0}
    assert {row for c, row in placed if c == cols["up"]} == {R - 1}
    assert {row for c, row in placed if c == cols["from_middle"]} == {6, 7}
    assert {row for c, row in placed if c == cols["to_middle"]} == {0, R - 1}
    assert {row for c, row in placed if c == cols["free"]} == set(range(R))
    assert {row for c, row in placed if c == cols["hand"]} == set(range(R))
    assert not any(c == cols["announce"] for c, _ in placed)
    assert legal[b.announce_offset:].all()   # every row may be announced after roll 1


def test_down_column_refuses_out_of_order_with_named_error():
    b = new_yamb_batch(2, CRO, seed=0)
    before = b.card.copy()
    acts = np.array([2 * 13 + 0, 0 * 13 + 5])    # game 0 fine (free/Ones), game 1: down/Sixes
    with pytest.raises(IllegalActionError, match=r"game 1 .*down column must be filled in order .*next: Ones"):
        b.step(acts)
    assert np.array_equal(b.card, before)         # nothing applied


def test_hand_column_only_first_roll():
    r = get_preset("seven_column")
    b = new_yamb_batch(1, r, seed=0)
    hand = r.columns.index("hand")
    assert b.legal_actions()[0, hand * r.n_rows + 3]
    b.step([b.hold_offset + 0])
    assert not b.legal_actions()[0, hand * r.n_rows:(hand + 1) * r.n_rows].any()
    with pytest.raises(IllegalActionError, match="hand column takes only the first roll"):
        b.step([hand * r.n_rows + 3])


@pytest.mark.parametrize("preset", list(PRESETS))
def test_announce_is_enforced_on_every_column(preset):
    r = get_preset(preset)
    b = new_yamb_batch(1, r, seed=5)
    yamb = r.row_index("yamb")
    b.step([b.announce_offset + yamb])
    assert b.announced[0] == yamb
    legal = b.legal_actions()[0]
    ac = r.announce_column
    assert np.flatnonzero(legal[:b.n_placements]).tolist() == [ac * r.n_rows + yamb]
    assert not legal[b.announce_offset:].any()
    for c in range(r.n_columns):
        for row in range(r.n_rows):
            if (c, row) != (ac, yamb):
                with pytest.raises(IllegalActionError):
                    b.step([c * r.n_rows + row])
    # Reroll to the end, then the announced row must take the dice, even for 0.
    while b.rolls_used[0] < b.rolls_max[0]:
        b.step([b.hold_offset])
    dice = b.dice[0].tolist()
    b.step([ac * r.n_rows + yamb])
    assert b.card[0, ac, yamb] == row_score(r, yamb, dice, r.rolls)
    assert b.announced[0] == -1 and b.turn[0] == 1


def test_announce_refused_after_second_roll_and_twice():
    b = new_yamb_batch(1, CRO, seed=1)
    b.step([b.hold_offset + 3])
    with pytest.raises(IllegalActionError, match="only after the first roll, not after roll 2"):
        b.step([b.announce_offset + 0])
    b2 = new_yamb_batch(1, CRO, seed=1)
    b2.step([b2.announce_offset + 4])
    with pytest.raises(IllegalActionError, match="already announced"):
        b2.step([b2.announce_offset + 5])


def test_announcing_compulsory_when_rest_is_full():
    b = new_yamb_batch(1, CRO, seed=2)
    card = np.full((4, 13), 10, dtype=np.int16)
    card[3, [2, 9]] = -1                          # two announce boxes left
    b.core.set_state(0, card, [1, 2, 3, 3, 3], 50, 1, -1)
    legal = b.legal_actions()[0]
    assert not legal[:b.announce_offset].any()     # no placement, no reroll
    assert np.flatnonzero(legal[b.announce_offset:]).tolist() == [2, 9]
    with pytest.raises(IllegalActionError, match="announcing is compulsory"):
        b.step([b.hold_offset + 7])


def test_always_compulsory_mode():
    r = CRO.replace(announce_compulsory="always")
    b = new_yamb_batch(1, r, seed=2)
    legal = b.legal_actions()[0]
    assert not legal[:b.announce_offset].any() and legal[b.announce_offset:].all()


def test_extra_rolls_on_last_turn():
    r = get_preset("six_dice")
    b = new_yamb_batch(1, r, seed=2)
    assert b.rolls_max[0] == 3
    card = np.full((4, 13), 5, dtype=np.int16)
    card[0, 0] = -1
    b.core.set_state(0, card, [1, 2, 3, 4, 5, 6], r.n_turns - 1, 1, -1)
    assert b.rolls_max[0] == 5
    for _ in range(4):
        b.step([b.hold_offset + 1])
    assert b.rolls_used[0] == 5 and not b.legal_actions()[0, b.hold_offset:b.announce_offset].any()
    b.step([0])
    assert b.done[0] and b.total[0] == card_total(r, b.card[0].tolist())


def test_bad_actions_name_the_game():
    b = new_yamb_batch(3, CRO, seed=0)
    with pytest.raises(IllegalActionError, match="game 2: action 999 is outside"):
        b.step([-1, -1, 999])
    with pytest.raises(IllegalActionError, match="expected 3 actions"):
        b.step([0, 0])
    b.step([0, -1, -1])                            # -1 leaves a game as it is
    assert b.turn.tolist() == [1, 0, 0]
    with pytest.raises(IllegalActionError, match="already filled"):
        b.step([0, -1, -1])                        # down/Ones again


def test_string_preset_and_unknown():
    from yamblab.errors import UnknownVariantError

    assert YambBatch(2, "six_dice").dice.shape == (2, 6)
    with pytest.raises(UnknownVariantError):
        YambBatch(2, "nope")


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_placement_masks_equal_the_reference_legal_boxes(preset):
    """The compiled placements the per-turn planner reads, against rules.legal_boxes, on random
    cards (empty, partly and almost full), first and later rolls, pure and not."""
    from yamblab.games.yamb.engine import placement_masks

    r = get_preset(preset)
    rng = np.random.default_rng(7)
    card = np.where(rng.random((60, r.n_columns, r.n_rows)) < rng.random((60, 1, 1)),
                    rng.integers(0, 50, (60, r.n_columns, r.n_rows)), -1).astype(np.int16)
    card[0] = -1
    card[1] = 5
    card[1, -1, -1] = -1
    for first, pure in ((True, True), (False, False), (False, True)):
        got = placement_masks(r, card, first, pure)
        for i in range(len(card)):
            want = np.zeros((r.n_columns, r.n_rows), bool)
            for c, row in legal_boxes(r, card[i].tolist(), 1 if first else 2, None, pure=pure):
                want[c, row] = True
            assert np.array_equal(got[i], want), (i, first, pure)
