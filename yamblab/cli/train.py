"""``yamblab train``: AlphaZero-style training on a Ray cluster (resumable)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from yamblab.cli.common import _parse_sets
from yamblab.cli.user_errors import user_errors
from yamblab.errors import DiskFullError, YamblabError


@user_errors
def train(
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Run config YAML (configs/…)."),
    resume: Optional[str] = typer.Option(None, help="Resume a run: its folder, or its name under runtime.run_dir."),
    address: Optional[str] = typer.Option(None, help="Join an existing Ray cluster (e.g. 'auto'); default: start a local one."),
    tracking_uri: Optional[str] = typer.Option(None, help="MLflow tracking URI (default: sqlite:///mlflow.db here)."),
    set_: list[str] = typer.Option([], "--set", help="Override a config key, e.g. --set train.lr=3e-4 (repeatable)."),
):
    """Train an agent by AlphaZero-style self-play on a Ray cluster, graded by the oracle."""
    import datetime

    from yamblab.training.runtime import CHECKPOINT, TrainingRun, machine_description
    from yamblab.training.config import apply_overrides, load_run_config
    from yamblab.training.tracking import Tracker

    iteration = 0
    if resume:
        import yaml

        from yamblab.model.checkpoint import load_checkpoint
        from yamblab.training.config import RunConfig
        from yamblab.training.configio import validate

        run_dir = Path(resume)
        if not _resumable(run_dir):
            base = load_run_config(config).runtime.run_dir if config else "runs"
            run_dir = Path(base) / resume
        if not _resumable(run_dir):
            raise YamblabError(f"no run to resume at {resume} (looked for {run_dir / CHECKPOINT})")
        if (run_dir / CHECKPOINT).exists():
            state = load_checkpoint(run_dir / CHECKPOINT)
            text, source, iteration = state["config"], str(run_dir / CHECKPOINT), int(state["iteration"])
        else:      # killed before its first checkpoint: the run starts again in its folder
            text, source = (run_dir / "config.yaml").read_text(), str(run_dir / "config.yaml")
        cfg = validate(RunConfig, yaml.safe_load(text), source)
        if set_:
            cfg = apply_overrides(cfg, _parse_sets(set_), "--set")
    else:
        if config is None:
            raise YamblabError("give --config configs/NAME.yaml (or --resume RUN)")
        cfg = load_run_config(config, _parse_sets(set_))
    tracker = Tracker(tracking_uri or cfg.tracking.uri, cfg.tracking.experiment)     # a bad store stops here
    warm = None
    if not resume:
        if cfg.train.init_from is not None:       # a bad checkpoint to start from stops here too
            from yamblab.training.runtime import warm_start_state

            warm = warm_start_state(cfg)
            typer.echo(f"warm start: the network of {cfg.train.init_from} (its EMA weights), "
                       f"boundary head {cfg.model.boundary_hidden} units wide; a new optimiser, schedule and replay buffer")
        from yamblab.atomic import atomic_write

        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        run_dir = _new_folder(Path(cfg.runtime.run_dir) / f"{cfg.name}-{stamp}")
        atomic_write(run_dir / "config.yaml", cfg.to_yaml().encode())
    resumed = (run_dir / CHECKPOINT).exists()
    # said before any work: from here on, whenever the run stops, this command carries it on
    typer.echo(f"run {run_dir} (iteration {iteration} of {cfg.runtime.iterations}); "
               f"resume with: yamblab train --resume {run_dir}")
    # roles that all live in this process (runtime.actors: in_process) need no Ray cluster
    started = cfg.runtime.actors == "ray" or address is not None
    if started:
        from yamblab.actors.cluster import init_ray

        init_ray(address)
    on_term = None
    run = None
    try:
        # SIGTERM (kill, a scheduler's stop) takes Ctrl-C's path: the run is marked KILLED and
        # the last checkpoint named. Set after Ray's init, whose own SIGTERM handler exits at once.
        on_term = _interrupt_on_sigterm()
        # the machine's speed before and after, beside the run's minutes: a shared VM's varies
        run = TrainingRun(cfg, run_dir, resume=resumed, tracker=tracker, time_machine=True, warm_state=warm)
        rt = cfg.runtime
        from yamblab.training.runtime import describe_devices

        typer.echo(f"resources: {run.backend.resources.describe()}\n"
                   f"devices: {describe_devices(run.backend.devices)}\n"
                   f"loop: self-play plays up to {rt.max_policy_lag} weight version(s) ahead of the learner; "
                   f"replay ratio {cfg.train.replay_ratio:g} optimiser samples per new position")
        run.run()
        out = run.finish()
        speed = run.machine
        last = {**run.history[-1], **(run.last_eval or {})}
        if "eval.regret_mean" in last:
            graded = (f"noise-free regret {last['eval.regret_mean']:.2f} points/game "
                      f"[{last['eval.regret_ci_low']:.2f}, {last['eval.regret_ci_high']:.2f}]")
        else:
            graded = (f"noise-free score vs the heuristic bot on the same dice "
                      f"{last.get('eval.vs_baseline_mean', float('nan')):+.1f} points/game "
                      f"[{last.get('eval.vs_baseline_ci_low', float('nan')):+.1f}, "
                      f"{last.get('eval.vs_baseline_ci_high', float('nan')):+.1f}]")
        typer.echo(f"done: {run.iteration} iterations, {run.elapsed / 60:.1f} min; {graded}, score "
                   f"{last.get('eval.score_mean', float('nan')):.1f}")
        from yamblab.training.summary import format_summary, run_summary

        reached = format_summary(run_summary(run.evals))
        if reached:
            typer.echo(reached)
        typer.echo(f"machine: {machine_description()}; the oracle table built in "
                   f"{speed['machine.oracle_seconds_start']:.2f} s on one thread before the run, "
                   f"{speed['machine.oracle_seconds_end']:.2f} s after it (the yardstick of its minutes)")
        typer.echo(f"checkpoint: {out['files'][0]}\nsee the runs: {tracker.ui_command()}")
    except DiskFullError as exc:
        raise DiskFullError(f"{exc}. {_kept(run, run_dir, iteration if resumed else None)}") from None
    except KeyboardInterrupt:
        typer.echo(f"\ninterrupted: the last checkpoint is kept; resume with: yamblab train --resume {run_dir}",
                   err=True)
        if run is not None and run.run_id:
            tracker.end_run(run.run_id, "KILLED")
        raise typer.Exit(130) from None
    finally:
        try:
            tracker.close(backfill=f"yamblab train --resume {run_dir}")
            if started:
                import ray

                ray.shutdown()
        finally:
            if on_term is not None:
                on_term()


def _interrupt_on_sigterm():
    """Make SIGTERM raise :class:`KeyboardInterrupt` in the main thread, as Ctrl-C does, so a
    run stopped by ``kill`` or a scheduler is marked KILLED and says where its checkpoint is.

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


def _kept(run, run_dir: Path, checkpointed: int | None) -> str:
    """What a run stopped by a full disk keeps, and the command that carries it on (its MLflow
    run is marked failed where the store still takes the write). ``checkpointed``: the
    iteration of the checkpoint the run started from (None: none), for a run stopped before it
    was made."""
    from yamblab.training.runtime import CHECKPOINT

    if run is not None and run.run_id:
        try:
            run.tracker.end_run(run.run_id, "FAILED")
        except Exception:  # noqa: BLE001 - best effort: the store may be on the full disk
            pass
    done = run.checkpointed if run is not None else checkpointed
    if done is None:
        return f"No checkpoint was written yet: free some space, then start it again with: yamblab train --resume {run_dir}"
    return (f"The last good checkpoint {run_dir / CHECKPOINT} (iteration {done}) is kept: free some space, then "
            f"resume with: yamblab train --resume {run_dir}")


def _resumable(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a run to carry on: its checkpoint, or the config of a run
    stopped before its first checkpoint."""
    from yamblab.training.runtime import CHECKPOINT

    return (run_dir / CHECKPOINT).exists() or (run_dir / "config.yaml").is_file()


def _new_folder(path: Path) -> Path:
    """Create a new run folder at ``path`` (``path-2``, ``-3``, … when a run started in the same
    second has it)."""
    for n in range(1, 1000):
        cand = path if n == 1 else path.with_name(f"{path.name}-{n}")
        try:
            cand.mkdir(parents=True)
            return cand
        except FileExistsError:
            continue
    raise YamblabError(f"cannot make a new run folder next to {path}: too many runs started at once")
