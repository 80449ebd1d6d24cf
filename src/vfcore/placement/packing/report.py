"""What a packing is asked and what it answers: :class:`SolverConfig`,
:class:`SolverReport` (what the solver did) and :class:`PackingResult`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from vfcore.errors import InvalidInputError

__all__ = ["PackingResult", "SolverConfig", "SolverReport", "Status"]


Status = Literal["OPTIMAL", "FEASIBLE", "INFEASIBLE", "UNKNOWN", "MODEL_INVALID", "NOT_RUN"]


@dataclass(frozen=True, slots=True)
class SolverConfig:
    """How CP-SAT runs. The default is deterministic: one worker, a fixed seed and a
    deterministic time limit, so the same input gives the same placement on any machine.

    ``max_time_s`` (wall clock) makes results machine-dependent; the CLI uses it
    and reports it. ``optimize`` spends up to ``optimize_deterministic_time`` on
    minimising the number of nodes used once a packing is found.
    """

    num_workers: int = 1
    random_seed: int = 0
    max_deterministic_time: float = 60.0
    max_time_s: float | None = None
    optimize: bool = True
    optimize_deterministic_time: float = 0.5

    def __post_init__(self) -> None:
        if not isinstance(self.num_workers, int) or self.num_workers < 1:
            raise InvalidInputError(
                "invalid-solver-config",
                f"num_workers={self.num_workers!r} must be an int >= 1",
                "use SolverConfig.deterministic() for reproducible runs",
            )
        if self.max_time_s is not None and not self.max_time_s > 0:
            raise InvalidInputError(
                "invalid-solver-config",
                f"max_time_s={self.max_time_s!r} must be > 0",
                "give a wall-clock limit in seconds, e.g. 30",
            )

    @classmethod
    def deterministic(cls, max_deterministic_time: float = 60.0) -> SolverConfig:
        return cls(num_workers=1, random_seed=0, max_deterministic_time=max_deterministic_time)

    @classmethod
    def wall_clock(cls, seconds: float, workers: int = 2) -> SolverConfig:
        return cls(num_workers=workers, max_time_s=seconds)

    @property
    def is_deterministic(self) -> bool:
        return self.num_workers == 1 and self.max_time_s is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_workers": self.num_workers,
            "random_seed": self.random_seed,
            "max_deterministic_time": self.max_deterministic_time,
            "max_time_s": self.max_time_s,
            "optimize": self.optimize,
            "deterministic": self.is_deterministic,
        }


@dataclass(frozen=True, slots=True)
class SolverReport:
    """What the solver did: ``method`` decided the verdict (bounds, ffd or cp-sat)."""

    status: Status
    method: str
    objective: float | None = None
    bound: float | None = None
    wall_s: float = 0.0
    deterministic: bool = True
    timed_out: bool = False
    variables: int = 0
    notes: tuple[str, ...] = ()

    @property
    def gap(self) -> float | None:
        if self.objective is None or self.bound is None:
            return None
        if self.objective == 0:
            return 0.0
        return abs(self.objective - self.bound) / abs(self.objective)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "method": self.method,
            "objective": self.objective,
            "bound": self.bound,
            "gap": self.gap,
            "wall_s": round(self.wall_s, 6),
            "deterministic": self.deterministic,
            "timed_out": self.timed_out,
            "variables": self.variables,
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class PackingResult:
    """A packing: ``feasible`` is True (all placed), False (proven impossible) or None (unknown).

    ``assignments`` maps placed pods to nodes; when infeasible it is a maximal
    partial placement (as many pods as the solver could place), used to
    explain the rest. ``cards`` gives the card index of each shared-mode pod.
    """

    feasible: bool | None
    assignments: tuple[tuple[str, str], ...]
    unplaced: tuple[str, ...]
    report: SolverReport
    cards: tuple[tuple[str, int], ...] = ()
    proofs: tuple[str, ...] = ()

    @property
    def nodes_used(self) -> int:
        return len({n for _, n in self.assignments})
