"""The 8-character ids a transcript or table shows, typed back into %agio commands in a real kernel;
an ambiguous prefix or one naming nothing is one UsageError line."""

from __future__ import annotations

import re

import pytest

from kernel_support import offline_kernel

SETUP = r'''
%load_ext agio_notebook
from agio_notebook import Agent, ScriptedModel
from agio_notebook.core import AgentSession
from agio_notebook import memory as agio_memory
bot = Agent(model=ScriptedModel(["one", "two", "three", "four", "five", "six"], loop=True), name="bot")
_c = lambda: get_ipython().magics_manager.registry['AgioMagics'].controller
'''


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = offline_kernel(tmp_path_factory, "id_prefixes_kernel", SETUP)
    yield k
    k.close()


def ok(kernel, code):
    res = kernel.execute(code, timeout=120)
    assert res["reply"]["content"]["status"] == "ok", (code, res["reply"]["content"])
    return res


def usage_error(kernel, code):
    res = kernel.execute(code, timeout=60)
    reply = res["reply"]["content"]
    assert reply["status"] == "error" and reply["ename"] == "UsageError", (code, reply)
    assert "\n" not in reply["evalue"]
    return reply["evalue"]


def test_short_ids_typed_back_into_every_command(kernel):
    ok(kernel, "%%agio bot\nhello")
    run = kernel.value("list(_c().handles)[-1]")
    session = kernel.value("_c().session_id")
    shown = kernel.value("repr(list(_c().handles.values())[-1])")  # '<agio run 7a08f20e completed: ...>'
    short = re.match(r"<agio run ([0-9a-f]{8}) ", shown).group(1)
    assert run.startswith(short) and len(short) == 8
    ok(kernel, "_ss = %agio sessions")  # the compact table shows short ids
    short_session = kernel.value("list(_ss['session_id'])")[-1]
    assert len(short_session) == 8 and session.startswith(short_session)
    transcript = kernel.value(f"_c().replay({run!r})['text/plain']")
    assert short in transcript  # the id as the transcript shows it
    ok(kernel, f"%agio retry {short}")
    retry = kernel.value("list(_c().handles)[-1]")
    assert retry != run and kernel.value(f"_c().repository.get_run({retry!r}).retry_of") == run
    assert kernel.value(f"len(_c().attempts({short!r}))") == 2
    ok(kernel, f"_a = %agio attempts {short}")
    assert kernel.value("len(_a)") == 2
    ok(kernel, f"%agio use-attempt {short} 1")
    ok(kernel, f"_s = %agio steps --run {short}")
    assert kernel.value("sorted(set(_s['run_id']))") == [short]  # compact frames show short ids
    ok(kernel, f"_t = %agio tree {short_session}")
    assert kernel.value("type(_t).__name__") == "RunTree"
    ok(kernel, f"%agio replay {short}")
    ok(kernel, f"_d = %agio diff {short} {retry[:8]}")
    assert kernel.value("type(_d).__name__") == "RunDiff"
    ok(kernel, f"_tr = %agio trace {short}")
    assert kernel.value("_tr.run_id") == run
    ok(kernel, f"%agio feedback {short} +1 short ids work --no-propose")
    ok(kernel, f"_f = %agio memory feedback {short}")
    assert kernel.value("list(_f['run_id'])") == [run]
    ok(kernel, f"%agio use {short_session}")
    ok(kernel, f"%%agio bot --session {short_session}\nand again")
    assert kernel.value(f"_c().repository.get_run(list(_c().handles)[-1]).session_id") == session
    ok(kernel, f"_fork = %agio fork {short_session} --at 1")
    fork = kernel.value("_fork")
    assert kernel.value(f"_c().repository.get_session({fork!r}).forked_from") == session
    ok(kernel, f"%agio tree {fork[:8]}")
    ok(kernel, f"_tc = %agio tool_calls --run {short}")
    ok(kernel, f"_ac = %agio actions --session {short_session}")
    ok(kernel, "items = ['a', 'b']\n_b = %agio batch items --agent bot --name report-kernel")
    ok(kernel, "_b.wait(60)")
    ok(kernel, "_ex = %agio executions --batch report-k")
    assert kernel.value("sorted(set(_ex['batch']))") == ["report-kernel"]
    res = ok(kernel, "%agio memory add-experience asked twice --lesson 'answer once' --tags style")
    printed = "".join(m["content"]["text"] for m in res["messages"] if m["msg_type"] == "stream")
    experience = printed.split("experience ")[1].split()[0]
    assert kernel.value(f"list(agio_memory.experiences(repository=_c().repository)['tags'])") == [["style"]]
    ok(kernel, f"%agio memory delete {experience[:8]}")
    assert kernel.value("len(agio_memory.experiences(repository=_c().repository))") == 0


def test_ambiguous_and_unknown_prefixes_are_one_usage_line(kernel):
    twins = ["abcdef02" + "0" * 24, "abcdef02" + "1" * 24]
    ok(kernel, "".join(f"_c().repository.commit(session=AgentSession(session_id={t!r}))\n" for t in twins))
    message = usage_error(kernel, "%agio tree abcdef02")
    assert "ambiguous" in message and twins[0] in message and twins[1] in message
    assert "no run 'zzzzzzzz'" in usage_error(kernel, "%agio retry zzzzzzzz")
    assert "no session 'zzzzzzzz'" in usage_error(kernel, "%agio fork zzzzzzzz --at 1")
    assert "no run 'zzzzzzzz'" in usage_error(kernel, "%agio steps --run zzzzzzzz")
    assert "ambiguous" in usage_error(kernel, "%agio use abcdef02")
