"""The sans-I/O API: events, answers, errors and timers, driven by hand."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jsontp_protocol as jt

from conftest import request_line


def events(conn, now=None):
    """Every event until the connection needs data or pauses; errors as
    (status, message) tuples in their place."""
    out = []
    while True:
        try:
            event = conn.next_event(now)
        except jt.RemoteProtocolError as error:
            out.append(("error", error.status, error.human_message, error.closes))
            continue
        if event is jt.NEED_DATA or event is jt.PAUSED:
            return out
        out.append(event)


def test_a_request_is_read_and_answered_in_order():
    server = jt.ServerConnection()
    server.receive_data(request_line("/a.txt") + request_line("/b.txt", headers={"accept-language": "fr-FR"}))
    first = server.next_event()
    assert isinstance(first, jt.Request)
    assert (first.id, first.method, first.path) == (0, "GET", "/a.txt")
    # One request at a time: the next waits until this one is answered (D2).
    second = server.next_event()
    assert isinstance(second, jt.Request) and second.id == 1
    assert second.headers == {"accept-language": ["fr-FR"]}
    server.send_response(1, jt.Response(200, "b", content="B"))
    # B waits behind A's answer.
    assert server.data_to_send() == b""
    server.send_response(0, jt.Response(200, "a", content="A"))
    out = server.data_to_send().split(b"\n")
    answers = [json.loads(line) for line in out if line]
    assert [a["resource"] for a in answers] == ["/a.txt", "/b.txt"]
    assert [a["body"]["content"] for a in answers] == ["A", "B"]
    assert all(a["headers"]["language"] == "en-US" and "date" in a["headers"] for a in answers)
    sent = events(server)
    assert [(e.id, type(e)) for e in sent] == [(0, jt.ResponseSent), (1, jt.ResponseSent)]


def test_bad_input_gives_the_protocols_answer_once_with_what_was_wrong():
    server = jt.ServerConnection()
    server.receive_data(request_line(method="FETCH"))
    with pytest.raises(jt.RemoteProtocolError) as raised:
        server.next_event()
    error = raised.value
    assert error.kind == "rejected"
    assert error.status == 400
    assert '"FETCH"' in error.human_message and "method" in error.human_message
    assert error.closes is False
    answer = json.loads(server.data_to_send())
    assert answer["status"]["code"] == 400
    assert answer["status"]["human-message"] == error.human_message
    # The connection goes on: the next request is read.
    server.receive_data(request_line())
    got = events(server)
    assert [type(e) for e in got] == [jt.ResponseSent, jt.Request]


def test_a_framing_error_closes_after_its_answer():
    server = jt.ServerConnection()
    server.receive_data(b'{"jsontp": [}\n')
    got = events(server)
    assert got[0][0] == "error" and got[0][1] == 400 and got[0][3] is True
    assert "cannot be framed" in got[0][2]
    # Closed comes once the rest is decided: write what is pending, then close.
    assert isinstance(got[1], jt.Closed) and "cannot be framed" in got[1].reason
    assert json.loads(server.data_to_send())["status"]["code"] == 400
    assert server.is_closed


def test_too_large_a_message_is_413():
    server = jt.ServerConnection(limits=jt.Limits(max_message_bytes=1000))
    server.receive_data(request_line(method="PUT", content="x" * 2000))
    got = events(server)
    assert got[0][:2] == ("error", 413)
    assert "1000" in got[0][2]


def test_the_idle_timer_is_time_as_data():
    server = jt.ServerConnection(idle_timeout=5.0, now=100.0)
    deadline = server.poll_timeout()
    assert deadline is not None and 100.0 < deadline <= 105.0 + 1e-6
    server.handle_timeout(now=104.0)
    assert not server.is_closed
    server.handle_timeout(now=105.5)
    assert server.is_closed
    closed = events(server, now=105.5)
    assert isinstance(closed[0], jt.Closed) and "idle" in closed[0].reason


def test_a_message_that_stops_half_way_times_out_with_408():
    server = jt.ServerConnection(limits=jt.Limits(message_timeout=2.0), now=10.0)
    server.receive_data(request_line()[:30], now=10.0)
    assert server.next_event(now=10.0) is jt.NEED_DATA
    server.handle_timeout(now=12.5)
    got = events(server, now=12.5)
    assert got[0][:2] == ("error", 408)
    assert json.loads(server.data_to_send(now=12.5))["status"]["code"] == 408


def test_continue_ask_accept_and_refuse():
    headers = {"expect": "100-continue"}
    server = jt.ServerConnection(continue_policy="ask")
    server.receive_data(request_line("/up.txt", "PUT", headers))
    asked = server.next_event()
    assert isinstance(asked, jt.ContinueRequested) and asked.request.method == "PUT"
    server.send_response(asked.id, jt.Response(401, "no token"))
    answer = json.loads(server.data_to_send())
    assert answer["status"]["code"] == 401
    # Refused unseen, the exchange is over and the connection stays open.
    assert [type(e) for e in events(server)] == [jt.ResponseSent]
    assert not server.is_closed and server.wants_read

    server = jt.ServerConnection(continue_policy="ask")
    server.receive_data(request_line("/up.txt", "PUT", headers))
    asked = server.next_event()
    server.accept_continue(asked.id)
    assert json.loads(server.data_to_send())["status"]["code"] == 100
    server.receive_data(request_line("/up.txt", "PUT", content="hello"))
    full = server.next_event()
    assert isinstance(full, jt.Request) and full.id == asked.id and full.content == b"hello"


def test_refused_continue_policy_answers_501():
    server = jt.ServerConnection(continue_policy="refuse")
    server.receive_data(request_line("/up.txt", "PUT", {"expect": "100-continue"}))
    got = events(server)
    assert got[0][:2] == ("error", 501)


def test_streamed_content_arrives_in_pieces_after_its_head():
    server = jt.ServerConnection(stream_content=True)
    data = request_line("/up.txt", "PUT", content="x" * 100_000)
    for i in range(0, len(data), 7_000):
        server.receive_data(data[i : i + 7_000])
    got = events(server)
    assert isinstance(got[0], jt.ContentHead) and got[0].request.method == "PUT"
    pieces = [e.data for e in got if isinstance(e, jt.Content)]
    assert len(pieces) > 1 and b"".join(pieces) == b"x" * 100_000
    assert isinstance(got[-1], jt.Request) and got[-1].content == b""


def test_a_streamed_response_goes_out_in_pieces():
    server = jt.ServerConnection()
    server.receive_data(request_line("/big.bin"))
    request = server.next_event()
    server.send_response_head(request.id, jt.Response(200, "here", encoding="gzip"))
    sent = b""
    for _ in range(4):
        assert server.content_room(request.id) > 0
        server.send_content(request.id, b"\x00\xff" * 10_000)
        sent += server.data_to_send()
    server.end_content(request.id)
    sent += server.data_to_send()
    client = jt.ClientConnection()
    client.send_request(jt.Request("GET", "/big.bin"))
    client.data_to_send()
    client.receive_data(sent)
    response = client.next_event()
    assert isinstance(response, jt.Response)
    assert response.encoding == "gzip" and response.content == b"\x00\xff" * 40_000
    # A streaming client learns the head before the pieces (D19).
    client = jt.ClientConnection(stream_content=True)
    client.send_request(jt.Request("GET", "/big.bin"))
    client.data_to_send()
    client.receive_data(sent)
    got = events(client)
    assert isinstance(got[0], jt.ResponseHead) and got[0].response.status == 200
    assert b"".join(e.data for e in got if isinstance(e, jt.Content)) == b"\x00\xff" * 40_000
    assert isinstance(got[-1], jt.Response) and got[-1].content == b""


def test_the_client_matches_responses_in_order_and_checks_the_echo():
    client = jt.ClientConnection()
    first = client.send_request(jt.Request("GET", "/a"))
    second = client.send_request(jt.Request("GET", "/b"))
    assert (first, second) == (0, 1)
    wire = client.data_to_send()
    assert wire.count(b"\n") == 2
    server = jt.ServerConnection()
    server.receive_data(wire)
    answered = 0
    while answered < 2:
        event = server.next_event()
        if isinstance(event, jt.Request):
            server.send_response(event.id, jt.Response(200, "ok", content=event.path))
            answered += 1
        else:
            assert isinstance(event, jt.ResponseSent)
        out = server.data_to_send()
        if out:  # b"" would tell the client the stream ended
            client.receive_data(out)
    got = events(client)
    assert [(r.id, r.text) for r in got] == [(0, "/a"), (1, "/b")]

    client = jt.ClientConnection()
    client.send_request(jt.Request("GET", "/a"))
    client.receive_data(
        b'{"jsontp":"1.0","type":"response","status":{"code":200,"formal-message":"OK",'
        b'"human-message":"ok"},"resource":"/other","headers":{"date":"2026-01-01T00:00:00Z+0000",'
        b'"language":"en-US"},"body":{"encoding":"identity","content":""}}\n'
    )
    with pytest.raises(jt.RemoteProtocolError) as raised:
        client.next_event()
    assert raised.value.kind == "resource-mismatch"
    assert raised.value.response.resource == "/other"


def test_a_client_whose_server_leaves_is_told():
    client = jt.ClientConnection()
    client.send_request(jt.Request("GET", "/a"))
    client.data_to_send()
    client.receive_data(b"")
    with pytest.raises(jt.RemoteProtocolError) as raised:
        client.next_event()
    assert raised.value.kind == "unexpected-eof" and raised.value.closes


def test_messages_made_in_python_are_judged_by_the_cores_rules():
    with pytest.raises(ValueError, match="language"):
        jt.Response(200, headers={"language": "english"})
    with pytest.raises(ValueError, match="UTF-8"):
        jt.Response(200, content=b"\xff\xfe")
    assert jt.Response(200, content=b"\xff\xfe", encoding="br").content == b"\xff\xfe"
    with pytest.raises(ValueError, match="method"):
        jt.Request("get", "/")
    with pytest.raises(ValueError, match="status"):
        jt.Response(999)
    request = jt.Request(
        "POST",
        "/form?x=1",
        headers={"accept": "text/plain, application/json;q=0.5", "cookies": {"a": "b"}},
        body={"name": "Ada"},
    )
    assert request.query == "x=1"
    assert request.headers == {"accept": ["text/plain", "application/json;q=0.5"], "cookies": {"a": "b"}}
    assert request.body == {"name": "Ada"}
    assert json.loads(request.to_bytes())["body"]["name"] == "Ada"
    assert jt.Response(404).message == "Not Found"


def test_answering_twice_is_a_local_error():
    server = jt.ServerConnection()
    server.receive_data(request_line())
    request = server.next_event()
    server.send_response(request.id, jt.Response(200))
    with pytest.raises(jt.LocalProtocolError, match="already answered"):
        server.send_response(request.id, jt.Response(200))


# Split invariance: the same events whatever the byte splits.

STREAM = (
    request_line("/a.txt", headers={"accept-encoding": ["gzip", "br"]})
    + b"\n  \n"
    + request_line("/b.txt", "PUT", content="h\u00e9llo \\ \" world" * 20)
    + request_line("/c.txt", "POST", content="name=Ada", headers={"content-type": "application/x-www-form-urlencoded"})
    + b'{"jsontp":"1.0","type":"request","resource":"/d","method":"NOPE","headers":{},"body":{"content":"","encoding":"identity"}}\n'
    + request_line("/e.txt")
)


def run_server(pieces, stream_content):
    server = jt.ServerConnection(stream_content=stream_content, now=0.0)
    seen = []
    for piece in pieces:
        server.receive_data(piece, now=0.0)
        while True:
            try:
                event = server.next_event(now=0.0)
            except jt.RemoteProtocolError as error:
                seen.append(("error", error.status, error.human_message))
                continue
            if event is jt.NEED_DATA or event is jt.PAUSED:
                if server.pending_bytes:
                    server.data_to_send(now=0.0)
                    continue
                break
            if isinstance(event, jt.Request):
                seen.append(("request", event.id, event.method, event.resource, event.content))
                server.send_response(event.id, jt.Response(200, "ok"), now=0.0)
            elif isinstance(event, jt.Content):
                if seen and seen[-1][0] == "content":
                    seen[-1] = ("content", seen[-1][1] + event.data)
                else:
                    seen.append(("content", event.data))
            elif isinstance(event, jt.ContentHead):
                seen.append(("head", event.id, event.request.resource))
    return seen


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=25), st.booleans())
def test_events_do_not_depend_on_how_the_bytes_were_split(cuts, stream_content):
    cuts = sorted(set(cuts))
    # b"" would say the stream ended (as in h11): splits give only pieces.
    pieces = [STREAM[a:b] for a, b in zip([0] + cuts, cuts + [len(STREAM)]) if b > a]
    assert run_server(pieces, stream_content) == run_server([STREAM], stream_content)


# Bad bytes never crash: every input ends in events, errors or a pause.


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2_000), st.sampled_from(["server", "client"]))
def test_arbitrary_bytes_never_crash(data, role):
    if role == "server":
        conn = jt.ServerConnection(stream_content=True)
    else:
        conn = jt.ClientConnection(stream_content=True)
        conn.send_request(jt.Request("GET", "/"))
        conn.data_to_send()
    conn.receive_data(data)
    conn.receive_data(b"")
    for _ in range(10_000):
        try:
            event = conn.next_event()
        except jt.RemoteProtocolError as error:
            assert error.human_message
            if error.status is not None:
                assert 400 <= error.status < 600
            conn.data_to_send()
            continue
        if event is jt.NEED_DATA or event is jt.PAUSED or isinstance(event, jt.Closed):
            break
        if isinstance(event, jt.Request):
            conn.send_response(event.id, jt.Response(200))
        conn.data_to_send()
    else:
        pytest.fail("the connection kept giving events")


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["jsontp", "type", "resource", "method", "headers", "body", "x"]),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=20),
            lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
            max_leaves=12,
        ),
    )
)
def test_arbitrary_json_objects_get_an_answer_or_a_request(obj):
    server = jt.ServerConnection()
    server.receive_data(json.dumps(obj).encode() + b"\n")
    try:
        event = server.next_event()
    except jt.RemoteProtocolError as error:
        assert error.status in (400, 404, 405, 406, 413, 415, 501, 505)
        assert json.loads(server.data_to_send())["status"]["code"] == error.status
        return
    assert isinstance(event, jt.Request)
