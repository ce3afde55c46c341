"""A real one-node SLURM on 127.0.0.1 for the tests: munged, slurmctld and slurmd from Debian's
``munge`` and ``slurm-wlm`` packages, started from a configuration written into a temporary
folder and stopped (every job cancelled first) at the end.

Nothing of the machine's own SLURM or munge is touched: the daemons use their own key, socket,
ports, state and spool folders, and the clients (sbatch, squeue, scancel, which dask-jobqueue
runs) find them through ``SLURM_CONF``. Only the loopback address is used.

:func:`start` raises :class:`SlurmUnavailable` with one line saying why where SLURM cannot run
(not installed, not root, a daemon that does not come up); the fixture turns that into a skip.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from _loopback import free_port

#: the name of the one node and partition
NODE = "mkrk-node"
PARTITION = "debug"
#: worker jobs a test may run side by side on the node (cores are shared: see slurm.conf)
SLOTS = 4


class SlurmUnavailable(RuntimeError):
    """SLURM cannot start here; the message is the reason, in one line."""


def _memory_mib() -> int:
    import psutil

    return int(psutil.virtual_memory().total // 2**20)


def _conf(folder: Path, munge_socket: Path, ctld_port: int, slurmd_port: int) -> str:
    cpus = os.cpu_count() or 1
    # The node's real CPUs and memory. The partition shares cores between up to SLOTS jobs
    # (OverSubscribe=FORCE) so that 4 one-core worker jobs run at once on a 2-core machine;
    # memory stays a consumable resource, so a job that asks for more than the node has pends.
    memory = _memory_mib() // 2  # leave the rest to the test process and the daemons
    share = f"OverSubscribe=FORCE:{SLOTS}"
    return f"""\
ClusterName=mkrktest
SlurmctldHost={socket.gethostname().split(".")[0]}(127.0.0.1)
MailProg=/bin/true
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={folder}/jobs.txt
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
DefMemPerCPU=512
KillWait=2
MinJobAge=600
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
SlurmdParameters=config_overrides
NodeName={NODE} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory} State=UNKNOWN
PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP {share}
"""


class Slurm:
    """A running one-node SLURM; :meth:`stop` cancels every job and stops the daemons."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.conf = folder / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))
        self._daemons: list[subprocess.Popen] = []

    def run(self, *command: str, timeout: float = 30) -> str:
        """A SLURM client command's output (its error raised with its stderr)."""
        done = subprocess.run(command, env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode:
            raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")
        return done.stdout

    def jobs(self) -> list[tuple[str, str, str]]:
        """(job id, name, state) of every job SLURM still holds pending or running."""
        out = self.run("squeue", "-h", "-o", "%i|%j|%T")
        return [tuple(line.split("|")) for line in out.splitlines() if line.strip()]

    def wait_until_no_jobs(self, seconds: float = 30) -> list[tuple[str, str, str]]:
        """The jobs left after waiting up to ``seconds`` for the queue to empty."""
        deadline = time.monotonic() + seconds
        while (left := self.jobs()) and time.monotonic() < deadline:
            time.sleep(0.5)
        return left

    def accounting(self) -> str:
        """Every job that ended, as SLURM's job-completion log records it (sacct without a
        database)."""
        path = self.folder / "jobs.txt"
        return path.read_text() if path.is_file() else ""

    def _daemon(self, *command: str) -> None:
        log = open(self.folder / f"{Path(command[0]).name}.out", "wb")  # noqa: SIM115
        self._daemons.append(subprocess.Popen(command, env=self.env, stdout=log,
                                              stderr=subprocess.STDOUT,
                                              start_new_session=True))

    def start(self, munge_socket: Path, seconds: float = 60) -> None:
        sbin = Path("/usr/sbin")
        key = self.folder / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self._daemon(str(sbin / "munged"), "--foreground", "--force",
                     f"--socket={munge_socket}", f"--key-file={key}",
                     f"--pid-file={self.folder}/munged.pid",
                     f"--log-file={self.folder}/munged.log",
                     f"--seed-file={self.folder}/munged.seed")
        _wait(lambda: munge_socket.exists(), 10, "munged did not open its socket", self)
        for sub in ("state", "spool"):
            (self.folder / sub).mkdir()
        self._daemon(str(sbin / "slurmctld"), "-D", "-i", "-f", str(self.conf))
        self._daemon(str(sbin / "slurmd"), "-D", "-N", NODE, "-f", str(self.conf))

        def idle() -> bool:
            try:
                state = self.run("sinfo", "-h", "-n", NODE, "-o", "%t", timeout=10).strip()
            except (RuntimeError, subprocess.TimeoutExpired):
                return False
            return state.startswith(("idle", "mix", "alloc"))

        _wait(idle, seconds, "the SLURM node did not become idle", self)

    def stop(self) -> None:
        """Cancel every job, then stop slurmd, slurmctld and munged (in that order)."""
        try:
            if self.jobs():
                self.run("scancel", "--full", "-p", PARTITION)
                self.wait_until_no_jobs(20)
        except (RuntimeError, OSError, subprocess.TimeoutExpired):
            pass  # the daemons go anyway; their jobs go with slurmd's process group below
        for proc in reversed(self._daemons):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(5)
        self._daemons.clear()

    def logs(self) -> str:
        """The daemons' logs' last lines (for a failure message)."""
        tails = []
        for name in ("munged.out", "slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out"):
            path = self.folder / name
            if path.is_file():
                lines = path.read_text(errors="replace").splitlines()[-5:]
                tails.append(f"--- {name}\n" + "\n".join(lines))
        return "\n".join(tails)


def _wait(ready, seconds: float, what: str, slurm: Slurm) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        dead = [p.args[0] for p in slurm._daemons if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            slurm.stop()
            reason = f"{Path(dead[0]).name} exited" if dead else f"{what} in {seconds:g}s"
            raise SlurmUnavailable(f"{reason} (logs in {slurm.folder})")
        time.sleep(0.3)


def start() -> Slurm:
    """A one-node SLURM on 127.0.0.1, started now; :class:`SlurmUnavailable` if it cannot be."""
    missing = [d for d in ("munged", "slurmctld", "slurmd", "sbatch") if not shutil.which(
        d, path=os.environ.get("PATH", "") + ":/usr/sbin")]
    if missing:
        raise SlurmUnavailable(f"SLURM is not installed here (no {', '.join(missing)}; "
                               "apt-get install slurm-wlm munge)")
    if os.geteuid() != 0:
        raise SlurmUnavailable("the one-node SLURM runs its daemons as root; this is not root")
    folder = Path(tempfile.mkdtemp(prefix="mkrk-slurm-"))
    # munged refuses a socket in a folder others can write; clients need to traverse it.
    folder.chmod(0o711)
    munge_socket = folder / "munge.socket"
    slurm = Slurm(folder)
    (folder / "slurm.conf").write_text(_conf(folder, munge_socket, free_port(), free_port()))
    slurm.start(munge_socket)
    return slurm


def stopped(folder: Path) -> dict[str, str]:
    """The environment of SLURM's client commands for a SLURM that is installed and configured
    but not running: a ``slurm.conf`` whose controller port nothing listens on, and no daemon
    started. :class:`SlurmUnavailable` where SLURM's client commands are not installed."""
    missing = [c for c in ("sbatch", "squeue", "scancel", "scontrol") if not shutil.which(c)]
    if missing:
        raise SlurmUnavailable(f"SLURM is not installed here (no {', '.join(missing)}; "
                               "apt-get install slurm-wlm munge)")
    conf = folder / "slurm.conf"
    conf.write_text(_conf(folder, folder / "munge.socket", free_port(), free_port()))
    return dict(os.environ, SLURM_CONF=str(conf))
