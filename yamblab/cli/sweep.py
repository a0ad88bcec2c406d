"""``yamblab sweep``: ablation grids and tuning studies (Optuna + Ray + MLflow)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from yamblab.cli.common import _parse_sets, interrupt_on_sigterm
from yamblab.cli.user_errors import user_errors


@user_errors
def sweep(
    spec: Path = typer.Argument(..., help="Sweep spec YAML (experiments/…)."),
    address: Optional[str] = typer.Option(None, help="Join an existing Ray cluster (HOST:6379, or auto on "
                                          "a cluster node); default: start a local one."),
    tracking_uri: Optional[str] = typer.Option(None, help="MLflow tracking URI: an MLflow server "
                                               "(http://HOST:5000); default sqlite:///mlflow.db here."),
    storage: Optional[str] = typer.Option(None, help="Optuna storage: a journal file path (one driver), or "
                                          "postgresql://USER:PASS@HOST:5432/DB (several sweeps at once)."),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="Override a key of the sweep spec "
                                   "(the value is read as YAML), e.g. --set name=ablation-b --set 'seeds=[4,5,6,7]' "
                                   "--set overrides.runtime.iterations=8 (a run setting of every trial) "
                                   "--set branch_from.iterations=40. Repeatable. A new name makes a new study; "
                                   "give the same --set again to resume it."),
):
    """Run (or resume) an ablation grid or tuning study; print each arm's regret and verdict.

    Rerun the same command to resume: finished trials are kept, trials a killed driver left half done carry on from their checkpoints, and after an edit of the spec the unchanged arms are kept while changed and new arms run (it says which). A trial whose node dies resumes from its checkpoint on another node. The parent MLflow run holds each arm's mean regret with its 95% interval across training seeds and evaluation games, and a comparison plot.

    Laptop: yamblab sweep experiments/ablation-small.yaml (a local Ray cluster, MLflow in mlflow.db, the Optuna journal in .yamblab/sweeps/).

    Ray cluster (ray up infra/ray-cluster.yaml, or ray start --head / ray start --address on each machine, RAY_AUTH_MODE=token with the same token everywhere), on the head: yamblab sweep SPEC --address auto --tracking-uri http://MLFLOW:5000 --storage postgresql://USER:PASS@DB:5432/optuna, from a folder every node mounts (the checkpoints go to runs/ there).

    KubeRay: kubectl apply -f infra/rayjob.yaml (its entrypoint is this command).

    Exact steps for each: infra/README.md."""
    from yamblab.sweeps.spec import load_sweep
    from yamblab.sweeps.driver import Sweep

    import time

    t0 = time.perf_counter()
    sp, base = load_sweep(spec, storage, _parse_sets(set_) if set_ else None)
    from yamblab.atomic import check_writable
    from yamblab.training.stores import DEFAULT_TRACKING_URI, check_sqlite_store, check_store_writable

    # the places a sweep writes, named at once
    check_writable(Path(base.runtime.run_dir), "the trials' run folders")
    if sp.storage_url().startswith("journal:"):
        check_writable(Path(sp.storage_url()[len("journal:"):]).parent, "the Optuna journal")
    check_store_writable(tracking_uri or sp.tracking_uri)
    check_sqlite_store(tracking_uri or sp.tracking_uri or DEFAULT_TRACKING_URI)
    joined = False
    if address is not None:      # a cluster that cannot be joined is named before any study or MLflow run
        from yamblab.actors.cluster import init_ray

        joined = init_ray(address)
    sw = None
    on_term = interrupt_on_sigterm()      # a scheduler's stop takes Ctrl-C's path
    try:
        sw = Sweep(sp, base, tracking_uri=tracking_uri, ray_address=address)
        rows = sw.run()
    except KeyboardInterrupt:
        import shlex
        import sys

        if sw is not None:
            sw.mark_stopped()
        typer.echo(f"\ninterrupted: the study keeps every finished trial, and each unfinished one its last "
                   f"checkpoint; resume with: yamblab {shlex.join(sys.argv[1:])}", err=True)
        raise typer.Exit(130) from None
    finally:
        on_term()
        if joined:
            import ray

            ray.shutdown()
    if sp.branch_from is not None:
        typer.echo(f"\nsweep {sp.name}: every trial branched from one trained base at iteration "
                   f"{sw.base_iteration} and trained {base.runtime.iterations} more iterations; each arm's "
                   f"loss per game in the mode it is judged on (modes explained under the table), lower is better\n")
    else:
        what = "oracle regret" if getattr(sw, "loss", "regret") == "regret" else "points behind the heuristic bot"
        typer.echo(f"\nsweep {sp.name}: {what} per game on the same evaluation dice (seed "
                   f"{base.runtime.eval_seed}; the games per mode are under the table), lower is better\n")
    typer.echo(sw.table_text if rows else "no finished trials")
    typer.echo(f"\nwall time {time.perf_counter() - t0:.0f} s on {_machine_speed()}")
    if rows:
        typer.echo(f"table and plots: {sw.tracker.artifact_folder(sw.parent_run_id)} (results.txt, "
                   "results_table.json, regret_by_arm.png and each mode's curves_*.png)")
    typer.echo(f"open the MLflow UI on these runs:  {sw.tracker.ui_command(sw.parent_run_id)}")


def _machine_speed() -> str:
    """The machine in a few words with its speed: the exact oracle's build on one thread (the
    official rules' table; benchmarks/oracle_build.py), a yardstick for comparing wall times."""
    from yamblab.training.placement import machine_description, oracle_build_seconds

    return f"{machine_description()}; the oracle table builds in {oracle_build_seconds():.2f} s on one thread"
