"""``stop_on_signals``: a SIGTERM handled while the main thread holds the event's own lock
(as ``Event.wait`` does around every wait) still stops the command."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# The handler runs at the first bytecode boundary after ``os.kill``: inside the ``with``,
# the lock held. A handler calling ``Event.set`` there waits for that lock forever.
_HELD_LOCK = textwrap.dedent("""
    import os, signal, sys
    from cdc.signals import stop_on_signals

    stop = stop_on_signals()
    with stop._cond:
        os.kill(os.getpid(), {signal})
        for _ in range(1000):
            pass
    print("stopped" if stop.wait(10) else "not stopped", flush=True)
""")


def _run(signal_name: str) -> str:
    done = subprocess.run([sys.executable, "-c", _HELD_LOCK.format(signal=signal_name)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_sigterm_with_the_events_lock_held_stops() -> None:
    assert _run("signal.SIGTERM") == "stopped"


def test_sigint_with_the_events_lock_held_stops() -> None:
    assert _run("signal.SIGINT") == "stopped"


def test_each_call_gets_its_own_event_and_only_the_last_is_set() -> None:
    script = textwrap.dedent("""
        import os, signal
        from cdc.signals import stop_on_signals

        first = stop_on_signals()
        second = stop_on_signals()
        os.kill(os.getpid(), signal.SIGTERM)
        print(second.wait(10), first.is_set(), flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False"]
