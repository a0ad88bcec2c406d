"""What the command groups share: the limits on games and seeds, the help text of a rule
variant, and the helpers that read a variant, ``--set`` options and a bad choice."""

from __future__ import annotations

from yamblab.errors import YamblabError
from yamblab.games.protocol import GAMES, check_options


#: the most games one command grades, and the largest dice seed
MAX_GAMES = 100_000_000
MAX_SEED = 2**64 - 1

RULES_HELP = ("Rule variant: a joker rule (forced = official, free = Verhoeff, priority = the reading "
              "of the 'How The AI Works' page, none), optionally followed by ',no-upper-bonus' "
              "and/or ',no-yahtzee-bonus'.")


def _rules(text: str):
    from yamblab.games.yahtzee.rules import YahtzeeRules

    return YahtzeeRules.parse(text)


def _parse_sets(sets: list[str]) -> dict:
    """``--set train.lr=3e-4`` options as a dict of dotted keys to YAML-parsed values: a
    :class:`~yamblab.training.configio.SetOptions`, so that a bad key or value among them is
    named as typed (``--set train.lrr: unknown key (did you mean train.lr?)``), not blamed on the
    config file."""
    import yaml

    from yamblab.errors import ConfigError
    from yamblab.training.configio import SetOptions

    out = SetOptions()
    for item in sets or []:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. train.lr=3e-4")
        k, _, v = item.partition("=")
        if not k.strip():
            raise ConfigError(f"--set {item!r}: no key before '=', e.g. train.lr=3e-4")
        try:
            out[k.strip()] = yaml.safe_load(v)
        except yaml.YAMLError:
            raise ConfigError(f"--set {item!r}: the value {v!r} is not valid YAML") from None
    return out


#: ``--game``'s help: the games of the one list (:data:`yamblab.games.protocol.GAMES`)
GAME_HELP = " or ".join(GAMES) + "."


def check_game_options(game: str, columns_flag: str = "--columns", **given) -> None:
    """Refuse an unknown ``--game`` and a game option another game takes (``given``: the
    command's ``rules``, ``preset``, ``columns`` flags; None when not given), in
    :func:`~yamblab.games.protocol.check_options`'s words with the command's flags.

    Raises:
        UnknownVariantError: an unknown game; ConfigError: a foreign option.
    """
    check_options(game, given, lambda o: columns_flag if o == "columns" else f"--{o}")


def _bad_choice(what: str, value: str, choices: list[str]) -> YamblabError:
    from yamblab.errors import UnknownVariantError

    return UnknownVariantError(f"unknown {what} {value!r}; choose one of {', '.join(choices)}")


def interrupt_on_sigterm():
    """Make SIGTERM raise :class:`KeyboardInterrupt` in the main thread, as Ctrl-C does, so a
    run or sweep stopped by ``kill`` or a scheduler is marked KILLED and says how to resume it.

    Returns a function that puts back the previous Python-level handler (Ray's, after its
    init). Does nothing (and its undo nothing) outside the main thread, where Python cannot set
    signal handlers."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    # None: the handler was not set from Python; the default ends the process
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
