import numpy as np
import pytest

from dreamgym_env.curriculum import Outcome
from dreamgym_env.curriculum.stats import (
    TaskEmbeddings,
    compute_task_stats,
    group_variance,
    similarity_clusters,
)
from dreamgym_env.records import Task


def _outcomes(task_id, rewards, start=0):
    return [Outcome(start + i, task_id, r, r > 0, 0.0) for i, r in enumerate(rewards)]


@pytest.mark.parametrize("rewards", [[1, 1, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0], [1] * 8, [0.2, 0.9, 0.5]])
def test_group_variance_is_population_variance(rewards):
    mean = sum(rewards) / len(rewards)
    assert group_variance(rewards) == pytest.approx(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    if set(rewards) <= {0, 1}:
        p = mean
        assert group_variance(rewards) == pytest.approx(p * (1 - p))
    assert group_variance([]) == 0.0


def test_stats_use_latest_n_only():
    history = {"a": _outcomes("a", [1, 1, 1, 1, 0, 0, 0, 0])}  # newest are the zeros
    stats = compute_task_stats(["a"], history, n=4)["a"]
    assert stats.variance == 0.0 and stats.mean_reward == 0.0 and stats.rollouts == 4
    assert compute_task_stats(["a"], history, n=8)["a"].variance == pytest.approx(0.25)


def test_sparse_tasks_borrow_their_similarity_cluster():
    history = {"a": _outcomes("a", [1], 0), "b": _outcomes("b", [0], 1), "c": _outcomes("c", [1, 1, 1, 1], 2)}
    clusters = np.array([0, 0, 2])
    stats = compute_task_stats(["a", "b", "c"], history, n=8, min_rollouts=2, clusters=clusters)
    assert stats["a"].grouped_by == "similarity" and stats["a"].variance == pytest.approx(0.25)
    assert stats["a"].own_rollouts == 1 and stats["a"].rollouts == 2
    assert stats["c"].grouped_by == "task" and stats["c"].variance == 0.0
    # Without clusters each task stands alone.
    alone = compute_task_stats(["a", "b"], history, n=8, min_rollouts=2)
    assert alone["a"].variance == 0.0 and alone["a"].grouped_by == "task"


def test_unexplored_task_has_no_outcomes():
    stats = compute_task_stats(["z"], {}, n=8)["z"]
    assert not stats.explored and stats.grouped_by == "none"


def test_similarity_clusters_link_near_instructions_only():
    emb = TaskEmbeddings()
    tasks = [
        Task(
            task_id="1",
            domain="webshop",
            instruction="i need red running shoes size 10, price lower than 50 dollars",
        ),
        Task(
            task_id="2",
            domain="webshop",
            instruction="i need red running shoes size 11, price lower than 50 dollars",
        ),
        Task(
            task_id="3", domain="webshop", instruction="find a queen memory foam mattress topper for my bed"
        ),
    ]
    labels = similarity_clusters(emb.of_tasks(tasks), threshold=0.8)
    assert labels[0] == labels[1] != labels[2]
    assert similarity_clusters(emb.of_tasks(tasks), threshold=1.01).tolist() == [0, 1, 2]
