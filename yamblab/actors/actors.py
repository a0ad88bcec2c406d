"""The Ray actors of a training run: oracle service, self-play workers, replay buffer, learner,
evaluator.

Each class here is plain Python (testable without Ray); :func:`remote_classes` wraps them as
Ray actors with the resources a run declares. Design points (and muzero-general's faults
avoided): every actor declares its CPUs and sets torch's threads to match; self-play plays many
games at once with one batched forward pass per step; workers load weights only when their
version changes; the weights travel once per version through the object store; the replay
buffer is bounded by a size budget in positions; in-flight self-play is bounded by the driver.
"""

from __future__ import annotations

import time
from dataclasses import fields

import numpy as np

from yamblab.actors.devices import DeviceProbe
from yamblab.actors.replay import ReplayBuffer
from yamblab.learners.samples import SampleBatch
from yamblab.vocabulary import metric_key


def _threads(cpus) -> None:
    """Torch's intra-op threads for an actor that declares ``cpus`` (rounded, at least one;
    one for an unresolved ``"auto"``: the backend resolves it before starting actors)."""
    import torch

    torch.set_num_threads(max(1, int(round(cpus))) if isinstance(cpus, (int, float)) else 1)


def weights_state(weights: list) -> dict:
    """The state_dict a published weight version holds: ``weights`` is the one-element list
    :meth:`LearnerActor.weights` returns (an ObjectRef of the state_dict, or the dict itself
    where no object store is in between)."""
    if isinstance(weights[0], dict):
        return weights[0]
    import ray

    return ray.get(weights[0])


def samples_to_dict(s: SampleBatch) -> dict[str, np.ndarray]:
    """A :class:`SampleBatch` as a dict of arrays (the replay buffer's storage format)."""
    return {f.name: getattr(s, f.name) for f in fields(s)}


def samples_from_dict(d: dict[str, np.ndarray]) -> SampleBatch:
    return SampleBatch(**d)


class SelfPlayWorker:
    """Plays self-play games with the EMA network; loads weights only on a new version.

    Args:
        config: the run config (a validated ``RunConfig``, passed whole); worker_id: this
            worker's number.
    """

    def __init__(self, config, worker_id: int = 0, device: str | None = None):
        from yamblab.learners.selfplay import SelfPlay

        cfg = config
        _threads(cfg.runtime.worker_cpus)
        self.worker_id = worker_id
        self.probe = DeviceProbe(f"self-play worker {worker_id}", device)
        self.selfplay = SelfPlay(cfg.model, cfg.train, cfg.search, cfg.game_obj, device=self.probe.device,
                                 bf16=cfg.runtime.bf16)
        self.loads = 0

    def device_report(self) -> dict:
        """``{"role", "device", "error"}``: where this worker plays, or why it may not."""
        return self.probe.report()

    def play(self, version: int, weights: list, n: int, seed: int, first_game: int, n_bot: int = 0,
             value_target_mix: float | None = None):
        """Play ``n`` games (game numbers ``first_game`` …) with weights ``version``.

        Args:
            weights: ``[ObjectRef or state_dict]``; fetched only when ``version`` is new.
            value_target_mix: λ of these games' value targets (None: the config's).

        Returns:
            ``(samples dict, stats dict)``.
        """
        if version != self.selfplay.version:
            w = weights[0]
            if not isinstance(w, dict):
                import ray

                w = ray.get(w)
            self.selfplay.set_weights(w, version)
            self.loads += 1
        t0 = time.perf_counter()
        samples, stats = self.selfplay.play_games(n, seed, first_game=first_game, n_bot=n_bot,
                                                   value_target_mix=value_target_mix)
        stats = {**stats, "worker": self.worker_id, "version": version, "busy_seconds": time.perf_counter() - t0}
        return samples_to_dict(samples), stats

    def weight_loads(self) -> int:
        """How many times this worker loaded weights (once per new version)."""
        return self.loads

    def pid(self) -> int:
        import os

        return os.getpid()


class ReplayBufferActor:
    """The bounded replay buffer as an actor (see :class:`~yamblab.actors.replay.ReplayBuffer`)."""

    def __init__(self, capacity: int, seed: int = 0, state: dict | None = None):
        self.buffer = ReplayBuffer.from_state_dict(state) if state else ReplayBuffer(capacity, seed)

    def add(self, samples: dict) -> int:
        self.buffer.add(samples)
        return len(self.buffer)

    def all(self) -> dict:
        return self.buffer.all()

    def sample(self, n: int, policy_share: float | None = None) -> dict:
        """``n`` positions drawn with replacement: one iteration's training data (see
        :meth:`~yamblab.actors.replay.ReplayBuffer.sample` for ``policy_share``)."""
        return self.buffer.sample(n, policy_share)

    def size(self) -> int:
        return len(self.buffer)

    def state_dict(self, data: bool = True) -> dict:
        """The buffer's state (without ``data``: without its positions, for a checkpoint)."""
        return self.buffer.state_dict(data)

    def positions(self, first: int, count: int) -> dict:
        """Positions number ``first`` to ``first + count - 1`` (a checkpoint fetches its new
        positions a chunk at a time: :meth:`~yamblab.actors.replay.ReplayBuffer.positions`)."""
        return self.buffer.positions(first, count)


class LearnerActor:
    """The learner: trains on the replay buffer, publishes versioned EMA weights.

    Runs on the GPU when Ray gave the actor one (``device`` None) or on ``device`` (roles in
    the driver's process), else on the CPU.
    """

    def __init__(self, config, state: dict | None = None, device: str | None = None):
        from yamblab.learners.learner import Learner

        cfg = config
        lt = cfg.runtime.learner_threads
        _threads(cfg.runtime.learner_cpus if lt == "auto" else lt)
        self.probe = DeviceProbe("learner", device)
        self.learner = Learner(cfg.model, cfg.train, device=self.probe.device, compile=cfg.runtime.learner_compile,
                               bf16=cfg.runtime.bf16)
        if state is not None:
            self.learner.load_state_dict(state)
        self._published: tuple[int, list] | None = None

    def device(self) -> str:
        return str(self.learner.device)

    def device_report(self) -> dict:
        """``{"role", "device", "error"}``: where the learner trains, or why it may not."""
        return self.probe.report()

    def train(self, samples: dict, lr: float | None = None) -> dict:
        """One iteration: a pass over ``samples`` (drawn from the replay buffer as the replay
        ratio asks) at learning rate ``lr`` (the run's schedule; None keeps the current one);
        returns metrics (``seconds``: the time this actor was busy)."""
        return self.learner.train_iteration(samples_from_dict(samples), lr=lr)

    def weights(self, store: bool = True) -> tuple[int, list]:
        """``(version, [ObjectRef of the EMA state_dict])``, put in the object store once per
        version; with ``store`` False (a run whose roles share one process), ``(version,
        [state_dict])`` on the CPU, no object store in between."""
        version, state = self.learner.get_weights()
        if self._published is None or self._published[0] != version:
            cpu = {k: v.detach().to("cpu") for k, v in state.items()}
            if store:
                import ray

                cpu = ray.put(cpu)
            self._published = (version, [cpu])
        return self._published

    def state_dict(self) -> dict:
        import torch

        state = self.learner.state_dict()
        return _to_cpu(state, torch)


def _to_cpu(obj, torch):
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu")
    if isinstance(obj, dict):
        return {k: _to_cpu(v, torch) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v, torch) for v in obj)
    return obj


class Evaluator:
    """Plays noise-free games on fixed dice and grades them (one evaluator for every game).

    Every run and every arm of a sweep is evaluated on the same games (``eval_seed``), so they
    compare on equal luck. Yahtzee's decisions are graded by the oracle service, and when the
    agent is full-turn search on the boundary head (a valuation of boundary states) its exact
    expected score is logged beside the regret (``eval.exact_score``,
    ``eval.exact_regret``: no sampling noise); a single Yamb
    column's by its exact column oracle (built in this actor once); a Yamb card of several
    columns, whose oracle covers its endgame only, is compared with the heuristic bot on the same
    dice, and its mean score above the greedy bot's on those dice is logged too
    (``eval.vs_greedy_*``, a paired 95% interval; both bots' scores are played once and kept);
    its endgame is graded exactly on the decision set (:meth:`solver_grade`,
    :meth:`endgame_grade`).

    Args:
        config: the run config (a validated ``RunConfig``, passed whole).
        oracle_service: the oracle service of a table game (:func:`~yamblab.oracle.registry.table_service_class`)
            as a Ray actor, the object itself (a run whose roles share one process), or None.
    """

    def __init__(self, config, oracle_service=None, device: str | None = None):
        self.cfg = config
        _threads(self.cfg.runtime.eval_cpus)
        self.probe = DeviceProbe("evaluator", device)
        self.service = oracle_service
        self.game = self.cfg.game_obj
        self._net = None
        self._baseline = None
        self._greedy = None     # the greedy bot's scores on the evaluation dice (a Yamb card)
        self._decisions = None  # the solver-graded decision set (runtime.solver_eval), built once
        self._endgame = None    # a Yamb card's endgame oracle (the exact regret), kept between evaluations

    def _network(self, weights):
        from yamblab.model.network import YambNet

        w = weights_state(weights)
        if self._net is None:
            self._net = YambNet(self.cfg.model).to(self.probe.device).eval()
            self._net.inference_bf16 = self.cfg.runtime.bf16
        self._net.load_state_dict(w, strict=True)
        return self._net

    def device_report(self) -> dict:
        """``{"role", "device", "error"}``: where the evaluator's network runs, or why it may not."""
        return self.probe.report()

    def evaluate(self, version: int, weights: list, whole: bool = True) -> dict:
        """Grade the network of ``weights``: per-game losses and scores, and summary metrics.
        Without ``whole`` (``runtime.eval_early``'s evaluations) the main mode and Yahtzee's exact
        regret only: no ``eval_modes``, nothing of the solver-graded decision set (a Yamb card's
        endgame regret included)."""
        from yamblab.agents.search_agent import network_agent

        t0 = time.perf_counter()
        net = self._network(weights)
        agent = network_agent(net, self.game, self.cfg.eval_depth)
        report = self.grade(agent)
        out = eval_payload(report, version, time.perf_counter() - t0)
        out["mode"] = self.cfg.eval_depth
        out["modes"] = {}
        for mode, games in (self.cfg.runtime.eval_modes if whole else {}).items():
            t1 = time.perf_counter()
            extra = eval_payload(self.grade(network_agent(net, self.game, mode), games=games), version, 0.0)
            m = extra["metrics"]
            key = "regret" if extra["loss"] == "regret" else "vs_baseline"
            out["metrics"].update({f"eval.{mode}.{key}_{k}": m[f"eval.{key}_{k}"] for k in ("mean", "ci_low", "ci_high")})
            out["metrics"][f"eval.{mode}.score_mean"] = m["eval.score_mean"]
            out["metrics"][f"eval.{mode}.games"] = games
            out["metrics"][f"eval.{mode}.seconds"] = time.perf_counter() - t1
            out["modes"][mode] = {"per_game_regret": extra["per_game_regret"], "loss": extra["loss"]}
        if self.exact_applies() and self.game.solved:
            from yamblab.model.exact_score import exact_network_score

            ex = exact_network_score(net, self.game.rules)
            out["metrics"].update({"eval.exact_score": ex["exact_score"], "eval.exact_regret": ex["exact_regret"],
                                   "eval.exact_seconds": ex["valuation_seconds"] + ex["evaluation_seconds"]})
            _add_mode(out, EXACT_MODE, np.array([ex["exact_regret"]]))
        elif whole and self.exact_applies():     # a card's endgame: played on the decision set's games
            self.endgame_grade(net, out)
        if whole and self.solver_applies():
            self.solver_grade(net, out)
        return out

    def solver_applies(self) -> bool:
        """Whether evaluations grade the network on the decision set (``runtime.solver_eval``,
        which the run config allows only on a game with an exact oracle, or of its endgame)."""
        return bool(self.cfg.runtime.solver_eval)

    def solver_grade(self, net, out: dict) -> None:
        """Grade ``net``'s policy and value heads on the decision set, into an evaluation's
        payload ``out``: every metric of :func:`~yamblab.search.decision_set.solver_losses` as
        ``eval.solver.*``, and each per-game loss as a mode of its own (``out["modes"][NAME]``
        with ``eval.NAME.regret_mean`` and its 95% interval over the set's games), so that a
        sweep pairs arms on it game by game."""
        from yamblab.search.decision_set import solver_losses

        sl = solver_losses(net, self._decision_set())
        out["metrics"].update({f"eval.solver.{k}": float(v) for k, v in sl.metrics.items()})
        out["metrics"]["eval.solver.seconds"] = float(sl.seconds)
        for name, per_game in sl.per_game.items():
            _add_mode(out, name, np.asarray(per_game, np.float64))

    def _decision_set(self):
        """The solver-graded decision set (``runtime.solver_games`` games), built or loaded once."""
        from yamblab.search.decision_set import decision_set

        if self._decisions is None:
            self._decisions = decision_set(self.game, games=self.cfg.runtime.solver_games)
        return self._decisions

    def exact_applies(self) -> bool:
        """Whether evaluations grade full-turn search exactly (:attr:`RunConfig.exact_evaluated`):
        on Yahtzee's boundary head by the backward pass, on a Yamb card over its endgames."""
        return bool(self.cfg.exact_evaluated)

    def endgame_grade(self, net, out: dict) -> None:
        """Grade ``net``'s full-turn search over the endgames of the decision set's games (a Yamb
        card; :func:`~yamblab.oracle.yamb.grading.endgame_regrets`), into an evaluation's payload
        ``out``: the mode :data:`EXACT_MODE`, game by game, ``eval.exact_regret`` and its split by
        decision kind (``eval.exact.KIND``). The endgame oracle is kept between evaluations, so
        each solved card is solved once a run."""
        from yamblab.agents.search_agent import network_agent
        from yamblab.oracle.registry import grade_endgame
        from yamblab.search.decision_set import DECISION_SEED
        from yamblab.search.registry import endgame_oracle

        t0 = time.perf_counter()
        if self._endgame is None:
            self._endgame = endgame_oracle(self.game)
            self._endgame.remember(*self._decision_set().endgame_states)   # its openings' cards, solved
        eg = grade_endgame(network_agent(net, self.game, "full_turn"), self.game, self._endgame,
                           games=self.cfg.runtime.solver_games, seed=DECISION_SEED)
        _add_mode(out, EXACT_MODE, eg["regrets"], loss=ENDGAME_LOSS)
        out["metrics"].update({"eval.exact_regret": float(eg["regrets"].mean()),
                               "eval.exact.decisions_per_game": float(eg["decisions"]),
                               "eval.exact_seconds": time.perf_counter() - t0})
        out["metrics"].update({f"eval.exact.{metric_key(k)}": float(v) for k, v in eg["by_decision"].items()})

    def grade(self, agent, games: int | None = None):
        """A :class:`~yamblab.oracle.report.GradeReport` of ``agent`` on the evaluation games
        (the first ``games`` of them; default ``runtime.eval_games``)."""
        rt = self.cfg.runtime
        n_games = games or rt.eval_games
        from yamblab.oracle.registry import grade_game

        options = {}
        if not self.game.solved:          # no exact oracle: paired with the bots on the same dice
            if self._baseline is None:
                from yamblab.agents.base import make_agent
                from yamblab.oracle.report import play_scores

                bot = make_agent("heuristic", self.game)
                most = max([rt.eval_games, *rt.eval_modes.values()])
                self._baseline = (bot, play_scores(bot, self.game, most, rt.eval_seed))
                self._greedy = play_scores(make_agent("greedy", self.game), self.game, most, rt.eval_seed)
            options = {"baseline": self._baseline[0], "baseline_scores": self._baseline[1][:n_games],
                       "yardsticks": {"greedy": self._greedy[:n_games]}}
        service = self.service
        if service is not None:           # a table game: each decision graded by the oracle service
            from yamblab.oracle.registry import service_regret_fn

            if not hasattr(service.grade, "remote"):    # the run's roles share one process
                grade_fn = service.grade
            else:
                import ray

                def grade_fn(*args):
                    return ray.get(service.grade.remote(*args))

            options["regret_fn"] = service_regret_fn(self.game, grade_fn)
        return grade_game(agent, self.game, games=n_games, seed=rt.eval_seed, **options)


#: the mode name of the exact full-turn regret (one number per network)
EXACT_MODE = "full_turn_exact"


#: the loss of :data:`EXACT_MODE` on a Yamb card: search's exact regret over the endgame, per game
ENDGAME_LOSS = "endgame_regret"


def _add_mode(out: dict, name: str, per_game: np.ndarray, loss: str | None = None) -> None:
    """Add a graded loss to an evaluation's payload as a mode: its per-game values (float64
    (games,), points or the loss's own unit; ``loss`` names it, default ``name``) and
    ``eval.NAME.regret_mean`` with its Student-t 95% interval over the games (a zero-width one
    for a single number)."""
    from yamblab.oracle.report import mean_ci

    m, lo, hi = mean_ci(per_game)
    out["modes"][name] = {"per_game_regret": per_game, "loss": loss or name}
    out["metrics"].update({f"eval.{name}.regret_mean": m, f"eval.{name}.regret_ci_low": lo,
                           f"eval.{name}.regret_ci_high": hi})


def eval_payload(report, version: int, seconds: float) -> dict:
    """Metrics and per-game arrays of an evaluation (a :class:`GradeReport`).

    ``per_game_regret`` is what sweeps compare (lower is better): the exact regret of each game
    when an oracle graded it; for a Yamb card without an oracle, the points each game scored
    below the baseline bot on the same dice (``loss`` says which).
    """
    metrics = {
        "eval.score_mean": report.mean, "eval.score_ci_low": report.ci[0], "eval.score_ci_high": report.ci[1],
        "eval.seconds": seconds, "eval.version": version,
        **{f"eval.regret.{metric_key(k)}": v for k, v in report.regret_by_decision.items()},
    }
    if report.has_regret:
        metrics.update({"eval.regret_mean": report.regret_mean, "eval.regret_ci_low": report.regret_ci[0],
                        "eval.regret_ci_high": report.regret_ci[1]})
        loss, per_game = "regret", report.regrets
    else:
        metrics.update({"eval.vs_baseline_mean": report.diff_mean, "eval.vs_baseline_ci_low": report.diff_ci[0],
                        "eval.vs_baseline_ci_high": report.diff_ci[1],
                        "eval.baseline_score_mean": report.baseline_mean})
        for name, ci in report.versus.items():
            metrics.update(dict(zip((f"eval.vs_{name}_mean", f"eval.vs_{name}_ci_low", f"eval.vs_{name}_ci_high"), ci)))
        loss = f"points below {report.baseline_agent}"
        per_game = np.asarray(report.baseline_scores, np.float64) - np.asarray(report.scores, np.float64)
    if report.upper_bonus_rate is not None:
        metrics["eval.upper_bonus_rate"] = report.upper_bonus_rate
    if report.yahtzee_rate is not None:
        metrics["eval.yahtzee_rate"] = report.yahtzee_rate
    if len(report.by_column) > 1:       # a Yamb card: where its points go, column by column
        metrics.update({f"eval.column.{k}_mean": v for k, v in report.by_column.items()})
    if report.announce_fill_rate is not None:
        metrics["eval.announce_fill_rate"] = report.announce_fill_rate
    return {"metrics": metrics, "per_game_regret": per_game, "loss": loss, "scores": report.scores,
            "by_box": report.regret_by_box, "by_decision": report.regret_by_decision,
            "report": report.to_dict()}


def remote_classes(cfg, res) -> dict:
    """The actor classes wrapped for Ray with the resources the run config declares (CPUs) and
    the GPUs (or shares of one) of ``res``, a resolved
    :class:`~yamblab.training.resources.Resources`."""
    import ray

    from yamblab.oracle.registry import has_table, table_service_class

    rt = cfg.runtime
    oracle = {"oracle": ray.remote(num_cpus=0)(table_service_class(cfg.game_obj))} if has_table(cfg.game_obj) else {}
    return {
        **oracle,
        "worker": ray.remote(num_cpus=rt.worker_cpus, num_gpus=res.worker_gpus, max_restarts=-1,
                             max_task_retries=0)(SelfPlayWorker),
        "buffer": ray.remote(num_cpus=0)(ReplayBufferActor),
        "learner": ray.remote(num_cpus=rt.learner_cpus, num_gpus=res.learner_gpus)(LearnerActor),
        "evaluator": ray.remote(num_cpus=rt.eval_cpus, num_gpus=res.eval_gpus)(Evaluator),
    }
