"""Fixtures of the engine's tests that more than one folder uses."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# A stand-in for nvidia-cuda-mps-control (no MPS on this machine): a real daemon process with private
# pipe and log folders that answers the control commands the partition scheduler sends.
FAKE_CONTROL = """\
#!{python}
# Stand-in for nvidia-cuda-mps-control: `-d` forks a daemon that creates the control pipe and
# exits when told to quit (FAKE_MPS=stubborn: never; mute: never opens the pipe either); without
# -d it answers one command.
import os, signal, subprocess, sys, time
pipe = os.environ["CUDA_MPS_PIPE_DIRECTORY"]
mode = os.environ.get("FAKE_MPS", "ok")
if sys.argv[1:] == ["-d"]:
    if mode == "fail":
        sys.exit("An instance of this daemon is already running")
    subprocess.Popen([sys.executable, __file__, "--serve"], start_new_session=True)
    sys.exit(0)
if sys.argv[1:] == ["--serve"]:
    time.sleep(0.1)
    if mode != "mute":
        open(os.path.join(pipe, "control"), "w").close()
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while not (os.path.exists(os.path.join(pipe, "quit")) and mode == "ok"):
        time.sleep(0.02)
    sys.exit(0)
command = sys.stdin.read().split()
if command == ["get_server_list"]:
    print("4242")
elif command[:1] == ["get_client_list"] and command[1:] == ["4242"]:
    clients = os.environ.get("FAKE_MPS_CLIENTS", "").split(",")
    parent = os.environ.get("FAKE_MPS_CLIENTS_OF")  # every child process of this pid is a client
    if parent:
        for entry in os.listdir("/proc"):
            try:
                stat = open("/proc/" + entry + "/stat").read() if entry.isdigit() else ")"
                if stat.split(")")[-1].split()[1:2] == [parent]:
                    clients.append(entry)
            except OSError:
                pass
    print("\\n".join(clients))
elif command == ["quit"]:
    open(os.path.join(pipe, "quit"), "w").close()
else:
    sys.exit("unknown command")
"""


@pytest.fixture
def fake_mps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    binary = tmp_path / "bin" / "nvidia-cuda-mps-control"
    binary.parent.mkdir()
    binary.write_text(FAKE_CONTROL.replace("{python}", sys.executable))
    binary.chmod(0o755)
    monkeypatch.setenv("PATH", f"{binary.parent}{os.pathsep}{os.environ['PATH']}")
    return binary
