"""One batched game interface that Yahtzee and Yamb both implement.

In the spirit of OpenSpiel's ``Game``/``State`` split and pgx's batched ``State``: a
:class:`Game` is the immutable description of a game (its rules) and the factory of
**batches**, each batch being ``n`` games played in lock step by a Cython engine
(:class:`~yamblab.games.yahtzee.engine.YahtzeeBatch`,
:class:`~yamblab.games.yamb.engine.YambBatch`). Everything above the games — self-play,
expectimax, the evaluator, grading, the agent registry — is written once against this
interface, in the **shared action space** of the network (:mod:`yamblab.games.encoding`):

=========================  ==========================================================
``0 .. 127``               score the dice in box (column ``a // 16``, row ``a % 16``)
``128 .. 191``             reroll the dice not held by hold mask ``a - 128``
``192 .. 207``             announce row ``a - 192`` (Yamb's announce column)
=========================  ==========================================================

What every batch offers (the engine's own arrays, numpy, one row per game): ``n``,
``done`` bool (n,), ``total`` int (n,) points so far (bonuses included), ``turn`` int (n,),
``step(engine_actions)``, ``legal_actions()`` in the engine's own action space.

:func:`make_game` builds a game from the names a run config uses.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from yamblab.errors import ConfigError, UnknownVariantError
from yamblab.games.encoding import EncodedBatch


@dataclass(frozen=True)
class GameEntry:
    """A game's one registration: its name in messages, its run-config options, and each of its
    pieces as ``"module:name"``. A piece is imported only by the registry of its own floor
    (:data:`PIECE_FLOORS`), so naming it here runs no import up the floors.

    Attributes:
        label: the game's name in messages (``"Yahtzee"``).
        options: the run-config options it takes, the first its main one (``rules``;
            ``preset`` and ``columns``).
        make: ``fn(**options) -> Game`` (options not given, None, are left out; the function's
            defaults apply, and an empty one too).
        full_turn, one_step: its search classes, each ``cls(rules, valuation)`` offering
            ``q(batch)`` and ``reset()`` (:mod:`yamblab.search.registry`).
        agents: its agents, a dict name -> ``factory(game, table, seed, **options)``
            (:mod:`yamblab.agents.base`; the ``search`` agent is every game's).
        grader: ``fn(agent, game, games, seed, **options) -> GradeReport``
            (:mod:`yamblab.oracle.registry`).
        exact: ``fn(game, table=None)``, the exact valuation of a solved game's boundary cards,
            which full-turn search turns into optimal play; None: no exact oracle.
        position_values: ``fn(enc, rules, table)``, exact points still to come of encoded
            positions; None: the game has none.
        table: the module of the one cached table that solves the whole game (its oracle
            service: :mod:`yamblab.oracle.yahtzee.service`); None: no such table.
        endgame: ``cls(rules, k)``, the exact values of the game's last turns where the whole
            game has none (offering ``k``, ``card_values`` and ``search()``); None: none.
        endgame_grader: ``fn(agent, game, endgame, games, seed) -> dict``, the exact regret of an
            agent's play over those last turns (:mod:`yamblab.oracle.registry`); None: none.
    """

    label: str
    options: tuple[str, ...]
    make: str
    full_turn: str
    one_step: str
    agents: str
    grader: str
    exact: str | None = None
    position_values: str | None = None
    table: str | None = None
    endgame: str | None = None
    endgame_grader: str | None = None


#: the floor of the registry that imports each kind of piece (tested: every piece lies there)
PIECE_FLOORS = {"make": "games", "full_turn": "search", "one_step": "search", "exact": "search",
                "position_values": "search", "agents": "agents", "grader": "oracle", "table": "oracle",
                "endgame": "search", "endgame_grader": "oracle"}

#: every game, by the name a run config and ``--game`` use: the one place a game is registered
GAMES: dict[str, GameEntry] = {
    "yahtzee": GameEntry(
        "Yahtzee", ("rules",),
        make="yamblab.games.yahtzee.game:from_options",
        full_turn="yamblab.search.expectimax:FullTurnSearch",
        one_step="yamblab.search.expectimax:OneStepSearch",
        agents="yamblab.agents.yahtzee_agents:AGENTS",
        grader="yamblab.oracle.yahtzee.grading:grade_game",
        exact="yamblab.search.expectimax:oracle_valuation",
        position_values="yamblab.search.expectimax:oracle_position_values",
        table="yamblab.oracle.yahtzee.service"),
    "yamb": GameEntry(
        "Yamb", ("preset", "columns"),
        make="yamblab.games.yamb.game:from_options",
        full_turn="yamblab.search.yamb_search:YambFullTurnSearch",
        one_step="yamblab.search.yamb_search:YambOneStepSearch",
        agents="yamblab.agents.yamb_bots:AGENTS",
        grader="yamblab.oracle.yamb.grading:grade_yamb",
        exact="yamblab.search.yamb_search:oracle_valuation",
        endgame="yamblab.search.yamb_endgame:YambEndgameOracle",
        endgame_grader="yamblab.oracle.yamb.grading:endgame_regrets"),
}


def load_piece(ref: str):
    """The object ``"module:name"`` names (a module for a bare ``"module"``), imported on first
    use. Each floor's registry calls it for the pieces of its own floor only."""
    module, _, name = ref.partition(":")
    mod = importlib.import_module(module)
    return getattr(mod, name) if name else mod


@runtime_checkable
class Game(Protocol):
    """A game: its rules and the batched engine that plays them.

    Attributes:
        name: ``"yahtzee"`` or ``"yamb"``.
        rules: the rule object (:class:`~yamblab.games.yahtzee.rules.YahtzeeRules` or
            :class:`~yamblab.games.yamb.rules.YambRules`).
        label: a short readable name of the variant (``"forced"``, ``"croatian[free]"``).
        digest: a stable 16-hex-digit hash of the rules (caches, MLflow tags).
        n_dice: dice per roll (5 or 6).
        n_turns: turns in a game (one box per turn).
        idle_action: the engine action a finished game is given (it is ignored).
        solved: whether :mod:`yamblab.oracle` solves this game exactly (every Yahtzee variant;
            a single down, up or free Yamb column). A solved game is graded in exact regret
            and its oracle can value search leaves; an unsolved one is graded against the
            heuristic bot on the same dice.
    """

    name: str
    rules: object
    label: str
    digest: str
    n_dice: int
    n_turns: int
    idle_action: int
    solved: bool

    def new_batch(self, n: int, seed: int, first_game: int = 0):
        """``n`` new games (first dice rolled); game ``i`` is game number ``first_game + i``
        of dice seed ``seed`` (the same number gets the same dice whoever plays it).

        Raises:
            ValueError: a negative ``n`` or a seed outside 0 .. 2**64 - 1.
        """

    def encode(self, batch) -> EncodedBatch:
        """The network's view of every game (legal mask in the shared space)."""

    def encode_boundary(self, batch, games: np.ndarray) -> EncodedBatch:
        """The cards of ``games`` as boundary positions (between turns: no dice)."""

    def to_engine(self, shared: np.ndarray) -> np.ndarray:
        """Shared actions → engine actions, int64 of the same shape.

        Raises:
            IllegalActionError / ValueError: an action this game does not have.
        """

    def to_shared(self, actions: np.ndarray) -> np.ndarray:
        """Engine actions → shared actions, int64 of the same shape."""

    def turn_start(self, batch) -> np.ndarray:
        """bool (n,): games at the first roll of a turn (no decision taken yet this turn)."""

    def rolls_left(self, batch) -> np.ndarray:
        """int64 (n,): the rolls each game may still take this turn (0: it must score)."""

    def bonus_reached(self, batch) -> np.ndarray:
        """float32 (n,): the share of upper bonuses the card has reached (the auxiliary
        bonus target: Yahtzee's single upper section, the mean over Yamb's columns)."""


def step_shared(game: Game, batch, shared: np.ndarray) -> None:
    """Apply one shared-space action per game (finished games ignore theirs).

    Raises:
        IllegalActionError: an action that is not legal for its game (nothing is applied).
    """
    a = np.asarray(shared, dtype=np.int64)
    live = ~np.asarray(batch.done)
    eng = np.full(a.shape[0], game.idle_action, np.int64)
    eng[live] = game.to_engine(a[live])
    batch.step(eng)


def make_game(game: str = "yahtzee", rules: str | None = None, preset: str | None = None,
              columns: list[str] | tuple[str, ...] | None = None) -> Game:
    """The game a run config names (:data:`GAMES`).

    Args:
        game: a name of :data:`GAMES`.
        rules: Yahtzee's rule variant (``"forced"``, ``"free,no-upper-bonus"``, …).
        preset: Yamb's rule preset (:data:`yamblab.games.yamb.rules.PRESETS`).
        columns: Yamb only: play only these columns of the preset, in this order (e.g.
            ``["free"]``: the single free-column game, which has an exact oracle).

    Raises:
        UnknownVariantError: an unknown game, rule variant, preset or column kind.
        ConfigError: an option that does not apply to the game, or a column the preset does not
            have.
    """
    key = str(game).strip().lower()
    given = check_options(key, {"rules": rules, "preset": preset, "columns": columns})
    return load_piece(game_entry(key).make)(**given)


def game_entry(game: str) -> GameEntry:
    """The :data:`GAMES` entry of the name ``game`` (as given: no case folding).

    Raises:
        UnknownVariantError: a name not in :data:`GAMES`, naming those that are.
    """
    if game not in GAMES:
        raise UnknownVariantError(f"unknown game {game!r}; choose one of {', '.join(GAMES)}")
    return GAMES[game]


def check_options(game: str, given: dict, flag=lambda o: f"`{o}`") -> dict:
    """The options of ``given`` that are set (not None), refusing an unknown game and any
    option ``game`` does not take (another game's), in one message: whose the options are and
    what ``game`` takes (``flag(name)`` writes an option: a config key by default, a
    command-line flag for the CLI).

    Raises:
        UnknownVariantError: an unknown game; ConfigError: a foreign option.
    """
    entry = game_entry(game)
    given = {k: v for k, v in given.items() if v is not None}
    foreign = [k for k in given if k not in entry.options]
    if foreign:
        raise ConfigError(_foreign_options(game, foreign, flag))
    return given


def _foreign_options(game: str, options: list[str], flag) -> str:
    owners = sorted({e.label for k, e in GAMES.items() if k != game and set(options) & set(e.options)})
    entry = GAMES[game]
    names = " and ".join(flag(o) for o in options)
    whose = f"{' / '.join(owners)} option{'s' if len(options) > 1 else ''}" if owners else "not an option"
    takes = " and ".join(flag(o) for o in entry.options)
    return f"{names} {'are' if len(options) > 1 else 'is'} {'a ' if len(options) == 1 and owners else ''}" \
           f"{whose}; {entry.label} takes {takes}"


def as_game(game_or_rules) -> Game:
    """A :class:`Game` from a game, a rules object or a game name.

    Raises:
        UnknownVariantError: an unknown game name.
    """
    if isinstance(game_or_rules, str):
        return make_game(game_or_rules)
    if hasattr(game_or_rules, "new_batch"):
        return game_or_rules
    from yamblab.games.yamb.rules import YambRules

    if isinstance(game_or_rules, YambRules):
        from yamblab.games.yamb.game import YambGame

        return YambGame(game_or_rules)
    from yamblab.games.yahtzee.game import YahtzeeGame

    return YahtzeeGame(game_or_rules)


__all__ = ["Game", "GameEntry", "GAMES", "PIECE_FLOORS", "as_game", "game_entry", "load_piece", "make_game",
           "step_shared"]
