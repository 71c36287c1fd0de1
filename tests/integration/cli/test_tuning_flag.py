"""`--tuning key=value` (engine/tuning.h) on every command that runs the model: settings are
parsed as the flags are read, so a bad one is a usage error naming the key before anything loads,
and good ones (repeatable, anywhere on the line) leave the output unchanged on the CPU."""
import pytest


@pytest.mark.parametrize("command", [
    ["run", "m", "p"],
    ["bench", "m"],
    ["logits", "m", "--tokens", "1"],
    ["perplexity", "m", "f"],
    ["serve", "m"],
])
@pytest.mark.parametrize("setting, message", [
    ("cuda_graph=off", "unknown key 'cuda_graph'"),
    ("gemv_mma=maybe", "key 'gemv_mma' takes on/off"),
    ("io_piece_kib=-4", "key 'io_piece_kib' takes a whole number of KiB"),
    ("step_graphs", "expected key=value"),
])
def test_bad_settings_are_usage_errors_naming_the_key(run_cli, command, setting, message):
    result = run_cli(*command, "--tuning", setting, check=False)
    assert result.returncode == 2, (command, setting, result.stderr)
    assert f"--tuning '{setting}'" in result.stderr
    assert message in result.stderr


def test_settings_leave_cpu_output_unchanged(run_cli, store):
    args = ["run", store, "def add(a, b):", "--raw", "--max-tokens", "8", "--no-eos",
            "--backend", "cpu"]
    plain = run_cli(*args)
    tuned = run_cli("run", "--tuning", "cuda_graphs=off", *args[1:], "--tuning", "io_piece_kib=0",
                    "--tuning", "expert_layer=off")
    assert tuned.stdout == plain.stdout
