"""fork_compare_choose: one fork per candidate, scored, the best kept."""

from ...execution import StepRunner


async def reference(session_id, candidates, repository):
    results = [await StepRunner(agent, repository=repository).fork(session_id, 1) for agent in candidates.values()]
    best = max(results, key=lambda r: "12" in (r.final_text or ""))
    return best.run_id


def keeps_the_original(session_id, candidates, repository):
    return repository.list_runs(session_id)[0].id


async def keeps_the_first(session_id, candidates, repository):
    results = [await StepRunner(agent, repository=repository).fork(session_id, 1) for agent in candidates.values()]
    return results[0].run_id


WRONG = [(keeps_the_original, "is not in a fork of the session"),
         (keeps_the_first, "you kept the branch that answered \"It's about 10.\"")]
