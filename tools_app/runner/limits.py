"""Resource limits of one run (docs/runs.md, "Limits") and how they are shown to people."""

from __future__ import annotations

from dataclasses import dataclass

# The kernel's default CFS period; the smallest quota it takes is 1 ms.
CPU_PERIOD_US = 100_000
MIN_CPU_QUOTA_US = 1_000
MIN_CPUS = MIN_CPU_QUOTA_US / CPU_PERIOD_US


@dataclass(frozen=True)
class Limits:
    timeout: float = 60
    memory_mb: int = 512
    max_processes: int = 64
    max_result_bytes: int = 1 << 20
    max_updates: int = 1000
    max_update_bytes: int = 64 << 10
    max_artifact_bytes: int = 10 << 20
    max_artifacts_total: int = 50 << 20
    stderr_tail_bytes: int = 64 << 10
    grace_seconds: float = 5
    disk_mb: int = 512  # everything the run can write (quota.py)
    cpus: float = 1.0  # CPU time per wall-clock second, over all its processes (cgroups.py)

    @property
    def memory_bytes(self) -> int:
        return self.memory_mb << 20

    @property
    def disk_bytes(self) -> int:
        return self.disk_mb << 20

    @property
    def cpu_quota_us(self) -> int:
        """The run's CPU time per CPU_PERIOD_US, in microseconds (cgroup cpu.max)."""
        return max(MIN_CPU_QUOTA_US, round(self.cpus * CPU_PERIOD_US))


def format_bytes(size: int) -> str:
    """1048576 -> "1 MiB", 65536 -> "64 KiB", 1500 -> "1500 bytes"."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    if size >= 1 << 20:
        return f"{size / (1 << 20):.1f} MiB"
    return f"{size} bytes"


def format_seconds(seconds: float) -> str:
    return f"{seconds:g} s"


def format_cpus(cpus: float) -> str:
    """1 -> "1 CPU", 0.5 -> "0.5 CPU", 2 -> "2 CPUs"."""
    return f"{cpus:g} CPU{'s' if cpus > 1 else ''}"
