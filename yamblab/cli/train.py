"""``yamblab train``: AlphaZero-style training on a Ray cluster (resumable)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from yamblab.cli.common import _parse_sets, interrupt_on_sigterm
from yamblab.cli.user_errors import user_errors
from yamblab.errors import DiskFullError, YamblabError


def _help_config(value: bool) -> None:
    """``--help-config``: the training settings by block, each with its default and its help."""
    if not value:
        return
    from yamblab.learners.config import BLOCKS, settings_by_block
    from yamblab.training.config import RUNTIME_BLOCKS, RuntimeConfig

    for section, model, blocks in (("train", None, BLOCKS), ("runtime", RuntimeConfig, RUNTIME_BLOCKS)):
        for block, settings in settings_by_block(model, blocks).items():
            typer.echo(f"\n{section} / {block}: {blocks[block]}")
            for name, default, text in settings:
                shown = "null" if default is None else str(default).lower() if isinstance(default, bool) else default
                typer.echo(f"  {section}.{name}: {shown}\n      {text}")
    typer.echo("\nset one in a config (train: {NAME: VALUE}) or with --set SECTION.NAME=VALUE")
    raise typer.Exit()


def _resumed(resume: str, config: Path | None, set_: list[str]):
    """``--resume``: the run's folder (a path, or a name under ``runtime.run_dir``), the config it
    carries on with, and its iteration. The recorded config is compared with ``-c``/``--set``:
    only what a resume may change is taken, each change said, before the folder is touched."""
    import yaml

    from yamblab.model.checkpoint import load_checkpoint
    from yamblab.sweeps.spec import load_run_config_file as load_run_config
    from yamblab.training.config import RunConfig, apply_overrides, resume_changes
    from yamblab.training.configio import validate
    from yamblab.training.resume import CHECKPOINT

    run_dir = Path(resume)
    if not _resumable(run_dir) and len(run_dir.parts) == 1:     # a bare name: a run under runtime.run_dir
        base = load_run_config(config).runtime.run_dir if config else "runs"
        if not _resumable(Path(base) / resume):
            raise YamblabError(f"no run to resume named {resume}: neither {resume}/ nor {Path(base) / resume}/ "
                               f"holds a {CHECKPOINT} or config.yaml")
        run_dir = Path(base) / resume
    if not _resumable(run_dir):
        raise YamblabError(f"no run to resume at {resume}: it holds no {CHECKPOINT} or config.yaml")
    iteration = 0
    if (run_dir / CHECKPOINT).exists():
        state = load_checkpoint(run_dir / CHECKPOINT)
        text, source, iteration = state["config"], str(run_dir / CHECKPOINT), int(state["iteration"])
    else:      # killed before its first checkpoint: the run starts again in its folder
        text, source = (run_dir / "config.yaml").read_text(), str(run_dir / "config.yaml")
    recorded = validate(RunConfig, yaml.safe_load(text), source)
    if config is not None:        # the config asked for: compared with the run's, not taken blindly
        cfg = load_run_config(config, _parse_sets(set_))
    else:
        cfg = apply_overrides(recorded, _parse_sets(set_), "--set") if set_ else recorded
    for line in resume_changes(recorded, cfg, source):
        typer.echo(f"resume changes {line}")
    return run_dir, cfg, iteration


@user_errors
def train(
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Run config YAML (configs/…)."),
    resume: Optional[str] = typer.Option(None, help="Resume a run: its folder, or its name under runtime.run_dir."),
    address: Optional[str] = typer.Option(None, help="Join an existing Ray cluster (e.g. 'auto'); default: start a local one."),
    tracking_uri: Optional[str] = typer.Option(None, help="MLflow tracking URI (default: sqlite:///mlflow.db here)."),
    set_: list[str] = typer.Option([], "--set", help="Override a config key, e.g. --set train.lr=3e-4 (repeatable)."),
    help_config: bool = typer.Option(False, "--help-config", is_eager=True, callback=_help_config,
                                     help="Print every train and runtime setting by block (optimiser, targets, "
                                          "exploration, ..., roles, evaluation) with its default and one line of "
                                          "help, and exit."),
):
    """Train an agent by AlphaZero-style self-play on a Ray cluster, graded by the oracle.

    A resume carries on the run as it was recorded; -c and --set may change only how long it
    goes, its evaluation and checkpoint cadence and the machine's resources (docs/training.md)."""
    from yamblab.sweeps.spec import load_run_config_file as load_run_config

    iteration = 0
    if resume:
        run_dir, cfg, iteration = _resumed(resume, config, set_)
    else:
        if config is None:
            raise YamblabError("give --config configs/NAME.yaml (or --resume RUN)")
        cfg = load_run_config(config, _parse_sets(set_))
    from yamblab.atomic import check_writable
    from yamblab.training.stores import DEFAULT_TRACKING_URI, check_sqlite_store, check_store_writable

    # places the run writes, named at once (a damaged MLflow database too)
    check_writable(run_dir if resume else Path(cfg.runtime.run_dir), "the run folder" if resume else "run folders")
    check_store_writable(tracking_uri or cfg.tracking.uri)
    check_sqlite_store(tracking_uri or cfg.tracking.uri or DEFAULT_TRACKING_URI)
    # roles that all live in this process (runtime.actors: in_process) need no Ray cluster; one
    # that cannot be joined is named here, before any run folder or MLflow run exists
    started = False      # whether this command started (or joined) Ray, and so shuts it down
    # SIGTERM (kill, a scheduler's stop) takes Ctrl-C's path: the run is marked KILLED and the
    # last checkpoint named (init_ray keeps this handler over Ray's, which exits at once)
    on_term = interrupt_on_sigterm()
    try:
        if cfg.runtime.actors == "ray" or address is not None:
            from yamblab.actors.cluster import init_ray

            started = init_ray(address)
            if cfg.runtime.actors == "ray":      # what the cluster cannot place, named before the run folder
                from yamblab.training.placement import cluster_resources

                cluster_resources(cfg)
        _train(cfg, run_dir if resume else None, iteration, tracking_uri)
    except KeyboardInterrupt:     # before the run's folder was said (after it, _train says what is kept)
        kept = f"the run folder is as it was; resume with: yamblab train --resume {run_dir}" if resume else \
            "no run folder was made"
        typer.echo(f"\ninterrupted before the run began: {kept}", err=True)
        raise typer.Exit(130) from None
    finally:
        on_term()
        if started:
            import ray

            ray.shutdown()


def _train(cfg, run_dir: Path | None, iteration: int, tracking_uri: str | None) -> None:
    """The run of ``cfg``: a new one (``run_dir`` None), or the one in ``run_dir`` carried on."""
    import datetime

    from yamblab.training.resume import CHECKPOINT
    from yamblab.training.runtime import TrainingRun
    from yamblab.training.placement import machine_description
    from yamblab.training.tracking import Tracker

    resume = run_dir is not None
    tracker = Tracker(tracking_uri or cfg.tracking.uri, cfg.tracking.experiment)     # a bad store stops here
    warm = None
    if not resume:
        if cfg.train.init_from is not None:       # a bad checkpoint to start from stops here too
            from yamblab.training.resume import warm_start_state

            warm = warm_start_state(cfg)
            typer.echo(f"warm start: the network of {cfg.train.init_from} (its EMA weights), "
                       f"boundary head {cfg.model.boundary_hidden} units wide; a new optimiser, schedule and replay buffer")
        from yamblab.atomic import atomic_write

        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        run_dir = _new_folder(Path(cfg.runtime.run_dir) / f"{cfg.name}-{stamp}")
        try:
            atomic_write(run_dir / "config.yaml", cfg.to_yaml().encode())
        except KeyboardInterrupt:      # an empty folder is no run: not left behind
            run_dir.rmdir()
            raise
    resumed = (run_dir / CHECKPOINT).exists()
    run = None
    try:
        # said before any work: from here on, whenever the run stops, this command carries it on
        typer.echo(f"run {run_dir} (iteration {iteration} of {cfg.runtime.iterations}); "
                   f"resume with: yamblab train --resume {run_dir}")
        # the machine's speed before and after, beside the run's minutes: a shared VM's varies
        run = TrainingRun(cfg, run_dir, resume=resumed, tracker=tracker, time_machine=True, warm_state=warm)
        rt = cfg.runtime
        from yamblab.training.placement import describe_devices

        typer.echo(f"resources: {run.backend.resources.describe()}\n"
                   f"devices: {describe_devices(run.backend.devices)}\n"
                   f"loop: self-play plays up to {rt.max_policy_lag} weight version(s) ahead of the learner; "
                   f"replay ratio {cfg.train.replay_ratio:g} optimiser samples per new position")
        run.run()
        out = run.finish()
        speed = run.machine
        last = {**run.history[-1], **(run.last_eval or {})}
        if "eval.regret_mean" in last:
            graded = (f"regret {last['eval.regret_mean']:.2f} points/game "
                      f"[{last['eval.regret_ci_low']:.2f}, {last['eval.regret_ci_high']:.2f}] on "
                      f"{cfg.runtime.eval_games} evaluation games")
        else:
            graded = (f"score against the heuristic bot on the same dice "
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
        done = run.checkpointed if run is not None else (iteration if resumed else None)
        kept = (f"the last checkpoint (iteration {done}) is kept" if done is not None
                else "no checkpoint was written yet (the run starts again in its folder)")
        typer.echo(f"\ninterrupted: {kept}; resume with: yamblab train --resume {run_dir}", err=True)
        if run is not None and run.run_id:
            tracker.end_run(run.run_id, "KILLED")
        raise typer.Exit(130) from None
    finally:
        tracker.close(backfill=f"yamblab train --resume {run_dir}")


def _kept(run, run_dir: Path, checkpointed: int | None) -> str:
    """What a run stopped by a full disk keeps, and the command that carries it on (its MLflow
    run is marked failed where the store still takes the write). ``checkpointed``: the
    iteration of the checkpoint the run started from (None: none), for a run stopped before it
    was made."""
    from yamblab.training.resume import CHECKPOINT

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
    from yamblab.training.resume import CHECKPOINT

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
