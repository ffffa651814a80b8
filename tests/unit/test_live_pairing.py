"""The pairing file of ``agentloop serve`` beside ``agentloop dev``
(agentloop/shared/live/pairing.py): trusted only when it is the user's
alone and its serve is alive; removed only by the serve that wrote it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentloop.shared.live.pairing import (
    Paired,
    PairingWatch,
    Unpaired,
    hello_proof,
    read_pairing,
    remove_pairing,
    write_pairing,
)


def test_a_written_file_is_the_user_s_alone_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "home" / "live.json"
    write_pairing(path, "http://127.0.0.1:8420", "s3cret")
    assert path.stat().st_mode & 0o777 == 0o600
    assert read_pairing(path) == Paired("http://127.0.0.1:8420", "s3cret")
    remove_pairing(path, "another serve's")
    assert path.exists()  # not ours to remove
    remove_pairing(path, "s3cret")
    assert not path.exists()


def test_a_file_others_may_read_a_dead_serve_s_or_a_broken_one_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "live.json"
    write_pairing(path, "http://127.0.0.1:1", "s")
    path.chmod(0o644)
    assert "not this user's alone" in _reason(path)
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    path.write_text(json.dumps({"url": "http://127.0.0.1:1", "token": "s", "pid": int(ended.stdout)}))
    path.chmod(0o600)
    assert "has ended" in _reason(path)
    path.write_text("{not json")
    assert "not a pairing file" in _reason(path)
    path.write_text(json.dumps({"url": "file:///etc/passwd", "token": "s", "pid": os.getpid()}))
    assert "names no gateway" in _reason(path)
    link = tmp_path / "link.json"
    link.symlink_to(path)
    assert "cannot be read" in _reason(link)  # a symlink is not followed
    assert "no agentloop serve" in _reason(tmp_path / "none.json")


def test_the_watch_looks_at_most_once_a_second(tmp_path: Path) -> None:
    path = tmp_path / "live.json"
    watch = PairingWatch(path)
    assert isinstance(watch.current(), Unpaired)
    write_pairing(path, "http://127.0.0.1:2", "t")
    assert isinstance(watch.current(), Unpaired)  # within the second: not looked again
    watch._looked -= 1.0
    assert watch.current() == Paired("http://127.0.0.1:2", "t")


def test_the_proof_depends_on_the_secret_and_the_nonce() -> None:
    assert hello_proof("a", "n" * 16) == hello_proof("a", "n" * 16)
    assert hello_proof("a", "n" * 16) != hello_proof("b", "n" * 16) != hello_proof("a", "m" * 16)


def _reason(path: Path) -> str:
    found = read_pairing(path)
    assert isinstance(found, Unpaired), found
    return found.reason


def test_a_run_nobody_follows_is_left_alone_longer_each_time_until_it_is_followed() -> None:
    from agentloop.shared.live.sinks import FIRST_MUTE_SECONDS, MUTE_SECONDS, Mutes

    mutes = Mutes()
    assert not mutes.muted("r", 0.0)
    spans, now = [], 0.0
    for _ in range(7):
        mutes.unfollowed(["r"], now)
        span = next(t for t in (x / 1000 for x in range(1, 2001)) if not mutes.muted("r", now + t))
        spans.append(round(span, 3))
        now += span
    assert spans == [FIRST_MUTE_SECONDS, 0.1, 0.2, 0.4, 0.8, MUTE_SECONDS, MUTE_SECONDS]
    assert not mutes.muted("other", now)
    mutes.unfollowed(["r"], now)
    mutes.followed("r")
    assert not mutes.muted("r", now)
