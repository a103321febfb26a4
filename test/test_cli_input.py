"""The CLI refuses malformed input in one clear line, before anything reaches the robot."""
import pytest

from embodied_memory.cli import main


@pytest.mark.parametrize("argv, message", [
    (["forget", "--identity", ""], "--identity: an identity id or display name is required"),
    (["forget", "--identity", "   "], "--identity: an identity id or display name is required"),
    (["forget", "--episode", ""], "--episode: an episode id is required"),
    (["query", "get_observation", "{oops"], "arguments: not JSON"),
])
def test_malformed_cli_input_is_a_one_line_error(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
