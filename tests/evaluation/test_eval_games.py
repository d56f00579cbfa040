"""``dreamgym eval-fidelity --games DIR``: real games played now, each transition asked of a predictor."""

from __future__ import annotations

import json

import pytest

from dreamgym_env.cli import main
from dreamgym_env.errors import DataFormatError
from dreamgym_env.evaluation.games import find_games


def test_a_folder_without_games_is_a_clear_error(tmp_path):
    (tmp_path / "notes.txt").write_text("no games here")
    with pytest.raises(DataFormatError, match="no TextWorld game files"):
        find_games(tmp_path)


def test_data_and_games_are_exclusive(tmp_path, capsys):
    assert main(["eval-fidelity", "--out", str(tmp_path / "r"), "--baseline", "repeat-state"]) == 2
    assert "exactly one of --data" in capsys.readouterr().out


@pytest.mark.real
def test_games_folder_is_played_and_scored_with_retrieval(tmp_path, capsys):
    pytest.importorskip("textworld")
    from dreamgym_env.buffer import ReplayBuffer
    from dreamgym_env.real.textworld import make_games, play_noisy_expert

    (game,) = make_games(tmp_path / "games", 1, seed=11, challenge="tw-coin_collector", settings={"level": 2})
    # The buffer holds other episodes of the same game: the nearest transition then knows this world.
    with ReplayBuffer.open(tmp_path / "buffer.sqlite", dedup="episode") as buffer:
        buffer.add_many(play_noisy_expert(game, 2, seed=99))
    out = tmp_path / "results"
    code = main(
        [
            "eval-fidelity",
            "--games",
            str(tmp_path / "games"),
            "--buffer",
            str(tmp_path / "buffer.sqlite"),
            "--out",
            str(out),
            "--episodes",
            "2",
            "--history-window",
            "1",
            "--top-k",
            "1",
            "--baseline",
            "repeat-state",
            "--baseline",
            "nearest-transition",
        ]
    )
    assert code == 0
    assert "transitions from 1 tasks (real games in" in capsys.readouterr().out
    repeat = json.loads((out / "repeat-state.fidelity.json").read_text())
    nearest = json.loads((out / "nearest-transition.fidelity.json").read_text())
    assert repeat["transitions"] == nearest["transitions"] > 0
    # Moving through a maze changes the room every step: copying the state is wrong, the same
    # game's recorded transition is right far more often.
    assert nearest["state_f1"] > repeat["state_f1"]
    assert (out / "fidelity.md").is_file()
