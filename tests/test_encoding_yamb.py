"""Yamb in the shared network layout: shapes, action round trips, decoded cards."""

import numpy as np
import pytest

from yamblab.errors import IllegalActionError
from yamblab.games import encoding as E
from yamblab.games.yamb.rules import PRESETS, get_preset
from yamblab.games.yamb.engine import new_yamb_batch, shared_action_to_yamb, yamb_action_to_shared


@pytest.mark.parametrize("preset", list(PRESETS))
def test_action_round_trip(preset):
    r = get_preset(preset)
    b = new_yamb_batch(1, r)
    acts = np.arange(b.n_actions)
    shared = yamb_action_to_shared(r, acts)
    assert len(set(shared.tolist())) == b.n_actions
    assert np.array_equal(shared_action_to_yamb(r, shared), acts)
    assert shared.max() < E.N_ACTIONS
    # Spot checks of the layout: placements col*16+row, holds 128+h, announcements 192+row.
    assert shared[2 * r.n_rows + 3] == 2 * 16 + 3
    assert shared[b.hold_offset + 5] == 128 + 5
    assert shared[b.announce_offset + 4] == 192 + 4
    with pytest.raises(IllegalActionError):
        yamb_action_to_shared(r, [b.n_actions])


def test_shared_actions_outside_the_card_are_refused():
    r = get_preset("croatian")
    for a in (4 * 16 + 0, 0 * 16 + 13, 128 + 32, 192 + 13, 208):
        with pytest.raises(IllegalActionError):
            shared_action_to_yamb(r, [a])


@pytest.mark.parametrize("preset", list(PRESETS))
def test_encoding_shapes_card_and_legal_mask_during_play(preset):
    r = get_preset(preset)
    b = new_yamb_batch(6, r, seed=11)
    step = 0
    while not b.done.all():
        enc = E.encode_yamb(b)
        assert enc.columns.shape == (6, 8, 16, 2) and enc.columns.dtype == np.float32
        assert enc.legal.shape == (6, E.N_ACTIONS) and enc.state.shape == (6, E.STATE_DIM)
        assert np.array_equal(E.decode_yamb_card(enc, r), b.card)
        legal = b.legal_actions()
        back = np.zeros_like(legal)
        idx = np.flatnonzero(enc.legal.any(0))
        back[:, shared_action_to_yamb(r, idx)] = enc.legal[:, idx]
        assert np.array_equal(back, legal)
        assert enc.legal.sum() == legal.sum()
        assert np.array_equal(enc.dice[:, :r.n_dice], b.dice)
        assert (enc.dice[:, r.n_dice:] == 0).all()
        live = ~b.done
        assert np.allclose(enc.state[live, :6].sum(1), 1.0)
        ann = b.announced
        assert np.array_equal(np.argmax(enc.state[:, 7:24], axis=1), np.where(ann >= 0, ann, 16))
        step += 1
        b.step(b.core.random_actions(5, step))
    assert (E.decode_yamb_card(E.encode_yamb(b), r) >= 0).all()


def test_column_types_features_and_flags():
    r = get_preset("seven_column")
    b = new_yamb_batch(1, r, seed=0)
    enc = E.encode_yamb(b)
    assert [E.COLUMN_TYPES[t] for t in enc.column_type[0, :7]] == list(r.columns)
    assert enc.column_type[0, 7] == 0
    assert enc.state[0, E.YAMB_STATE_FLAGS["straight_by_roll"]] == 1.0
    assert enc.state[0, E.YAMB_STATE_FLAGS["middle_clamp"]] == 0.0
    assert enc.state[0, E.STATE_FIELDS["game_is_yahtzee"]] == 0.0
    card = np.full((7, 12), -1, dtype=np.int16)
    card[0, :8] = [3, 4, 9, 12, 15, 18, 27, 8]
    b.core.set_state(0, card, [1, 1, 2, 3, 4], 8, 1, -1)
    f = E.encode_yamb(b).column_features[0, 0]
    assert np.allclose(f, [61 / 60, 0.0, 3 * (27 - 8) / 60, 3 / 5])
    six = E.encode_yamb(new_yamb_batch(1, "six_dice"))
    assert six.state[0, E.STATE_FIELDS["n_dice_6"]] == 1.0
    assert six.state[0, E.YAMB_STATE_FLAGS["last_turn_extra_rolls"]] == 1.0


@pytest.mark.parametrize("preset", list(PRESETS))
def test_boundary_encoder_reuses_its_buffer_and_matches_the_encoder(preset):
    """The search leaves' reusable encoder writes exactly what encode_yamb_boundary writes,
    whatever the batch sizes before it (a smaller batch after a larger one leaves no trace)."""
    from yamblab.games.yamb.game import BoundaryEncoder, encode_yamb_boundary

    r = get_preset(preset)
    rng = np.random.default_rng(3)
    enc = BoundaryEncoder(r)
    for m in (40, 7, 300, 1):
        card = np.where(rng.random((m, r.n_columns, r.n_rows)) < 0.6,
                        rng.integers(0, 70, (m, r.n_columns, r.n_rows)), -1).astype(np.int16)
        card[0] = 0
        card[0, -1, -1] = -1                       # one box left: the longer last turn
        want = encode_yamb_boundary(r, card)
        got = enc(card)
        assert len(got) == m
        for f in ("columns", "column_type", "column_features", "dice", "state", "legal"):
            assert np.array_equal(getattr(got, f), getattr(want, f)), f


def _random_encoded_cards(r, m, seed, filled, high):
    """``m`` random cards int16 (m, C, R) of rules ``r`` (each box filled with probability
    ``filled``, scores 0..high-1, else -1) and their encoding by ``write_yamb_card``."""
    rng = np.random.default_rng(seed)
    shape = (m, r.n_columns, r.n_rows)
    card = np.where(rng.random(shape) < filled, rng.integers(0, high, shape), -1).astype(np.int16)
    enc = E.EncodedBatch.empty(m)
    E.write_yamb_card(enc, card, r)
    return card, enc


@pytest.mark.parametrize("preset", list(PRESETS))
def test_card_encoding_kernel_matches_the_formulas(preset):
    """The compiled card writer against the encoding's formulas written out in numpy."""
    from yamblab.games.yamb.rules import MAX_ROW, MIN_ROW, ONES_ROW

    r = get_preset(preset)
    m, C, R = 200, r.n_columns, r.n_rows
    card, enc = _random_encoded_cards(r, m, seed=5, filled=0.7, high=90)
    filled = card >= 0
    sc = np.maximum(card, 0).astype(np.float64)
    assert np.array_equal(enc.columns[:, :C, :R, 0], filled.astype(np.float32))
    assert np.allclose(enc.columns[:, :C, :R, 1], sc / E.SCORE_SCALE, rtol=1e-6, atol=0)
    assert not enc.columns[:, C:].any() and not enc.columns[:, :, R:].any()
    up = sc[:, :, :6].sum(2)
    mid = sc[:, :, ONES_ROW] * (sc[:, :, MAX_ROW] - sc[:, :, MIN_ROW])
    if r.middle_clamp:
        mid = np.maximum(mid, 0.0)
    mid = np.where(filled[:, :, ONES_ROW] & filled[:, :, MAX_ROW] & filled[:, :, MIN_ROW], mid, 0.0)
    want = np.stack([up / 60, np.maximum(0, r.upper_bonus_threshold - up) / 60, mid / 60,
                     sc[:, :, ONES_ROW] / 5], axis=-1)
    assert np.allclose(enc.column_features[:, :C], want, rtol=1e-6, atol=0)
    assert [E.COLUMN_TYPES[t] for t in enc.column_type[0, :C]] == list(r.columns)


@pytest.mark.parametrize("preset", ["croatian", "jamb_nn"])
def test_middle_products_are_the_known_parts_of_the_middle_term(preset):
    """``card_middle`` boundary features: the card's features, then per column Ones × Max and
    Ones × Min / 60 where both boxes are filled, written out from the integer cards."""
    import torch

    from yamblab.games.yamb.rules import MAX_ROW, MIN_ROW, ONES_ROW
    from yamblab.model.heads import CARD_FEATURES, BoundaryValueHead, card_features, card_middle_features

    r = get_preset(preset)
    m, C, R = 300, r.n_columns, r.n_rows
    card, enc = _random_encoded_cards(r, m, seed=9, filled=0.5, high=36)
    cols, feats = torch.from_numpy(enc.columns), torch.from_numpy(enc.column_features)
    got = card_middle_features(cols, feats).double().numpy()
    assert got.shape == (m, CARD_FEATURES + 16)
    assert np.array_equal(got[:, :CARD_FEATURES], card_features(cols, feats).double().numpy())
    o, mx, mn = (card[:, :, row].astype(np.float64) for row in (ONES_ROW, MAX_ROW, MIN_ROW))
    want = np.zeros((m, 8, 2))
    want[:, :C, 0] = np.where((o >= 0) & (mx >= 0), o * mx, 0.0) / 60
    want[:, :C, 1] = np.where((o >= 0) & (mn >= 0), o * mn, 0.0) / 60
    np.testing.assert_allclose(got[:, CARD_FEATURES:], want.reshape(m, 16), rtol=1e-6, atol=1e-9)
    assert (want[:, :C] > 0).any() and (want[:, :C] == 0).any()   # both cases occur
    head = BoundaryValueHead(16, features="card_middle")
    assert head(cols, feats).shape == (m,)
    with pytest.raises(ValueError, match="unknown boundary features"):
        BoundaryValueHead(16, features="cards")
