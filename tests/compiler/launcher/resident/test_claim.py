"""ask.claimed: how a client waits for the resident nvstage's claim on its request."""

import os
import socket
import time

from nvstage.compiler.launcher.resident import ask


def _ends():
    conn, server_side = socket.socketpair()  # the request's connection (its server end idle)
    mine, theirs = ask.claim_pair()
    return conn, server_side, mine, theirs


def test_a_claim_wakes_a_hand_over_at_once():
    # The child claims, then waits for the client's streams: the client must see the claim
    # as it comes (woken), not at its next look.
    conn, server_side, mine, theirs = _ends()
    try:
        assert ask.claim(theirs, b"1234")
        t, w = time.thread_time(), time.monotonic()
        assert ask.claimed(conn, mine, os.getpid(), woken=True) == b"1234"
        assert time.monotonic() - w < ask.TICK_S  # there already: no tick waited out
        assert ask.claimed(conn, mine, os.getpid(), bound=0.1, woken=True) is None  # once
        assert time.thread_time() - t < 0.5
    finally:
        for s in (conn, server_side, mine, theirs):
            s.close()


def test_an_end_closed_unclaimed_is_looked_at_each_tick_not_spun_on():
    conn, server_side, mine, theirs = _ends()
    try:
        theirs.close()  # the server dropped the request without a claim: readable for ever
        t = time.thread_time()
        assert ask.claimed(conn, mine, os.getpid(), bound=0.3, woken=True) is None
        assert time.thread_time() - t < 0.2  # CPU, not wall: ticks slept, no busy loop
    finally:
        for s in (conn, server_side, mine):
            s.close()


def test_the_server_s_answer_or_end_comes_first():
    conn, server_side, mine, theirs = _ends()
    try:
        server_side.close()
        assert ask.claimed(conn, mine, os.getpid(), woken=True) == b""
    finally:
        for s in (conn, mine, theirs):
            s.close()
