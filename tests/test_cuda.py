"""The same results on a CUDA GPU as on the CPU; every test here is skipped without one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from study_helpers import write_reviews
from test_knowledge_lm import tiny_lm
from tiny_models import save_tiny_bert

from adaptlab.analysis.api import similarity_analysis
from adaptlab.cli.app import main
from adaptlab.data import load_dataset
from adaptlab.engine.restore import load_trained
from adaptlab.knowledge.attribution import token_attribution
from adaptlab.knowledge.editing import erase, value_slot_edit
from adaptlab.knowledge.hooks import scaled_neurons
from adaptlab.knowledge.prompts import token_queries
from adaptlab.knowledge.scoring import score_answer
from adaptlab.models import load_model
from adaptlab.records.config import TrainConfig
from adaptlab.runs.run import RunSpec, execute
from adaptlab.select import extract, sample_examples
from adaptlab.tasks.registry import LABELLED

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
PROMPT = ("The capital of [X] is [Y].", "France", "Paris")


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_attribution_on_cuda_matches_the_cpu(arch: str) -> None:
    cpu, gpu = tiny_lm(arch), tiny_lm(arch)
    gpu.model.to("cuda")
    expected = token_attribution(cpu, token_queries(cpu, *PROMPT)[0], 8, rule="riemann")
    found = token_attribution(gpu, token_queries(gpu, *PROMPT)[0], 8, rule="riemann")
    assert found.scores.device.type == "cpu"
    scale = expected.scores.abs().max().item()  # tiny random models give tiny scores
    assert scale > 0
    torch.testing.assert_close(found.scores, expected.scores, rtol=1e-3, atol=1e-4 * scale)
    assert found.probability == pytest.approx(expected.probability, rel=1e-4)


def test_scaling_and_editing_on_cuda_restore_every_weight() -> None:
    lm = tiny_lm("llama")
    lm.model.to("cuda")
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    clean = score_answer(lm, *PROMPT).log_prob
    with scaled_neurons(lm, [(0, 1), (1, 2)], 0.0):
        suppressed = score_answer(lm, *PROMPT).log_prob
    with value_slot_edit(lm) as edit:
        erase(edit, [(0, 1), (1, 2)])
        assert score_answer(lm, *PROMPT).log_prob == pytest.approx(suppressed, abs=1e-5)
    assert suppressed != clean
    for name, value in lm.model.state_dict().items():
        assert torch.equal(value, before[name]), name


def test_training_evaluation_analysis_and_features_on_cuda(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = save_tiny_bert(str(tmp_path / "tiny-bert"))
    data = write_reviews(tmp_path / "reviews.csv", rows=120)
    train = TrainConfig(epochs=2, batch_size=8, learning_rate=1e-3, seed=0)
    spec = RunSpec.build(model, str(data), "houlsby", train=train, device="cuda")
    record = execute(spec, tmp_path / "run", progress=False)
    assert (record.peak_memory_bytes or 0) > 0

    loaded, _ = load_trained(tmp_path / "run", "cuda", model=model)
    assert next(loaded.model.parameters()).device.type == "cuda"
    argv = ["eval", "--adapter", str(tmp_path / "run"), "--data", str(data), "--split", "test"]
    argv += ["--model", model]
    with pytest.raises(SystemExit) as done:
        main([*argv, "--device", "cuda", "--json"])
    assert done.value.code == 0
    again = json.loads(capsys.readouterr().out)
    assert {k: again[k] for k in record.test} == pytest.approx(dict(record.test), abs=1e-5)

    on = {device: similarity_analysis(tmp_path / "run", str(data), "rsa", tokens=50, model=model,
                                      device=device, out=tmp_path / device, progress=False)
          for device in ("cpu", "cuda")}  # fmt: skip
    scores = {d: [row["score"] for row in w.result["layers"]] for d, w in on.items()}
    assert scores["cuda"] == pytest.approx(scores["cpu"], abs=1e-4)

    dataset = load_dataset(str(data), LABELLED)
    examples = sample_examples(dataset, 32, 0)
    features = {}
    for device in ("cpu", "cuda"):
        base = load_model(model, "base")
        base.model.to(device)
        features[device] = extract(base, examples, dataset, progress=False).hidden
    assert features["cuda"] == pytest.approx(features["cpu"], abs=1e-4)
