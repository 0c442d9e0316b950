"""Device names are checked before any model loads: unknown or missing devices are one line."""

from __future__ import annotations

import pytest
import torch

from adaptlab.errors import ConfigError
from adaptlab.knowledge import load_lm
from adaptlab.models.device import torch_device


def test_cpu_is_always_there_and_unknown_names_are_refused() -> None:
    assert torch_device("cpu") == torch.device("cpu")
    with pytest.raises(ConfigError, match="unknown device 'gpu'"):
        torch_device("gpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_where_there_is_none_fails_before_loading() -> None:
    with pytest.raises(ConfigError, match="CUDA is not available here"):
        torch_device("cuda:0")
    with pytest.raises(ConfigError, match="CUDA is not available here"):
        load_lm("no-such-model", device="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_gpu_index_past_the_last_is_refused() -> None:
    with pytest.raises(ConfigError, match="this machine has"):
        torch_device(f"cuda:{torch.cuda.device_count()}")
