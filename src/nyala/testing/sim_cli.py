"""``nyala-sim``: run the Raft simulator over many seeds, or replay one.

    nyala-sim --seeds 1000 --nemesis all          # seeds 0..999, every nemesis
    nyala-sim --seed 4711 --nemesis crash,churn   # one seed, with its details
    nyala-sim --seeds 500 --driver pipelined --ticks aligned

Each violation is printed with its seed and the exact command that replays it; the summary
gives the number of seeds, violations, simulated steps and steps per second.  The exit code
is 1 when any seed failed.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from collections import Counter
from collections.abc import Iterator

import click

from nyala.testing.sim.cluster import DRIVERS, TICK_MODES
from nyala.testing.sim.nemesis import ALL_NEMESES
from nyala.testing.sim.runner import SeedResult, SimOptions, parse_nemeses, replay_command, run_seed

__all__ = ["main"]


def _run(args: tuple[int, SimOptions]) -> SeedResult:
    seed, options = args
    return run_seed(seed, options)


def _results(seeds: range, options: SimOptions, jobs: int) -> Iterator[SeedResult]:
    if jobs <= 1:
        for seed in seeds:
            yield run_seed(seed, options)
        return
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        yield from pool.imap_unordered(_run, ((seed, options) for seed in seeds), chunksize=4)


@click.command(help=__doc__)
@click.option("--seeds", type=click.IntRange(min=1), default=100, show_default=True, help="How many seeds to run.")
@click.option("--start", type=click.IntRange(min=0), default=0, show_default=True, help="First seed.")
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Run this one seed and print its details.")
@click.option(
    "--nemesis",
    default="all",
    show_default=True,
    help=f"'all', 'none' or a comma-separated list of: {', '.join(ALL_NEMESES)}.",
)
@click.option("--duration-ms", type=click.IntRange(min=1000), default=SimOptions.duration_ms, show_default=True)
@click.option("--nodes", type=click.IntRange(min=1, max=7), default=SimOptions.nodes, show_default=True)
@click.option("--clients", type=click.IntRange(min=1), default=SimOptions.clients, show_default=True)
@click.option("--keys", type=click.IntRange(min=1), default=SimOptions.keys, show_default=True)
@click.option(
    "--driver",
    type=click.Choice(DRIVERS),
    default=SimOptions.driver,
    show_default=True,
    help="pipelined: the leader sends before its own sync; sequential: everything after it; mixed: per replica.",
)
@click.option(
    "--ticks",
    type=click.Choice(TICK_MODES),
    default=SimOptions.ticks,
    show_default=True,
    help="aligned: heartbeats on a shared tick phase (tick(now_tick)); own: counted per leader; mixed: per replica.",
)
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Worker processes.")
@click.option("--fail-fast", is_flag=True, help="Stop at the first violation.")
def main(
    seeds: int,
    start: int,
    seed: int | None,
    nemesis: str,
    duration_ms: int,
    nodes: int,
    clients: int,
    keys: int,
    driver: str,
    ticks: str,
    jobs: int,
    fail_fast: bool,
) -> None:
    try:
        kinds = parse_nemeses(nemesis)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--nemesis") from exc
    options = SimOptions(
        duration_ms=duration_ms, nodes=nodes, clients=clients, keys=keys, nemeses=kinds, driver=driver, ticks=ticks
    )
    if seed is not None:
        start, seeds = seed, 1
    started = time.perf_counter()
    failed: list[int] = []
    total_steps = 0
    done = 0
    # What the seeds went through, so a long run can show it exercised what it claims to.
    totals: Counter[str] = Counter()
    for result in _results(range(start, start + seeds), options, jobs):
        done += 1
        total_steps += result.steps
        totals.update(result.actions)
        totals["tablet-copies"] += result.tablet_copies
        totals["leader-terms"] += result.terms
        if seed is not None:
            _print_details(result)
        if not result.ok:
            failed.append(result.seed)
            click.echo(f"VIOLATION seed={result.seed}: {result.violation}")
            click.echo(f"  replay: {replay_command(result.seed, options)}")
            if fail_fast:
                break
        if seeds >= 500 and done % 500 == 0:
            _print_summary(done, failed, total_steps, time.perf_counter() - started, progress=True)
    _print_summary(done, failed, total_steps, time.perf_counter() - started, progress=False)
    if seed is None:
        click.echo("totals: " + ", ".join(f"{k}={v}" for k, v in sorted(totals.items())))
    sys.exit(1 if failed else 0)


def _print_details(result: SeedResult) -> None:
    click.echo(
        f"seed {result.seed}: {'ok' if result.ok else 'VIOLATION'}; {result.steps} steps, "
        f"{result.sim_ms / 1000:.1f} s simulated in {result.wall_s:.2f} s; {result.operations} client ops "
        f"({result.unknown_operations} with unknown outcome); {result.messages} messages; "
        f"{result.terms} leader terms; {result.tablet_copies} tablet copies"
    )
    click.echo("  faults: " + ", ".join(f"{k}={v}" for k, v in sorted(result.actions.items())))


def _print_summary(done: int, failed: list[int], steps: int, wall: float, progress: bool) -> None:
    rate = steps / wall if wall > 0 else 0.0
    label = "progress" if progress else "summary"
    click.echo(
        f"{label}: seeds={done} violations={len(failed)} steps={steps} wall={wall:.1f}s steps/s={rate:,.0f}"
        + (f" failed_seeds={failed[:20]}" if failed else "")
    )
