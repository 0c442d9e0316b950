"""Combining adapters' tensors: the same LoRA pairs as PEFT's add_weighted_adapter for every
how (under the combination_type `Combination.peft_type` names; DARE's masks included, from the
same seed), linear as the exact weighted sum of the updates, the rules on hand-built tensors,
and every option of a Combination refused in one line when it is wrong."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from tiny_models import tiny_model

from adaptlab.errors import ConfigError
from adaptlab.methods.combination import HOWS, Combination
from adaptlab.methods.combine_math import combine_deltas, combine_lora, result_rank
from adaptlab.methods.combine_rules import merge_tensors

NAMES = ("task1", "task2", "task3")
WEIGHTS = (0.5, 0.3, -0.2)
ALPHAS = (8, 4, 16)
SEED = 7
PRUNING = ("ties", "ties_svd", "dare_linear", "dare_ties", "dare_linear_svd", "dare_ties_svd")
PRUNING += ("magnitude_prune", "magnitude_prune_svd")


def peft_sources(ranks: tuple[int, int, int]) -> Any:
    """A tiny Llama with three PEFT LoRA adapters of random A and non-zero B: the first two on
    the query and value projections, the third on the query and output projections (so at the
    value projection the third is absent, at the output projection the first two are)."""
    peft = pytest.importorskip("peft", reason="peft comes with the bench extra")
    model = tiny_model("llama", causal=True)
    targets = (["q_proj", "v_proj"], ["q_proj", "v_proj"], ["q_proj", "o_proj"])
    configs = [
        peft.LoraConfig(r=rank, lora_alpha=alpha, target_modules=target)
        for rank, alpha, target in zip(ranks, ALPHAS, targets, strict=True)
    ]
    wrapped = peft.get_peft_model(model, configs[0], adapter_name=NAMES[0])
    for name, config in zip(NAMES[1:], configs[1:], strict=True):
        wrapped.add_adapter(name, config)
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for _, layer in lora_layers(wrapped):
            for name in NAMES:
                if name in layer.lora_A:
                    for side in (layer.lora_A[name].weight, layer.lora_B[name].weight):
                        side.copy_(torch.randn(side.shape, generator=generator))
    return wrapped


def lora_layers(model: torch.nn.Module) -> Iterator[tuple[str, Any]]:
    """PEFT's LoRA layers in the model's module order."""
    from peft.tuners.lora import LoraLayer

    for name, module in model.named_modules():
        if isinstance(module, LoraLayer):
            yield name, module


def peft_combined(model: Any, combination: Combination) -> str:
    """PEFT's add_weighted_adapter for `combination`; torch's global generator is seeded with
    SEED right before its merge loop (after it has initialised the new adapter's layers)."""
    lora = model.base_model
    inject = lora.inject_adapter

    def inject_then_seed(*args: Any, **kwargs: Any) -> None:
        inject(*args, **kwargs)
        torch.manual_seed(SEED)

    lora.inject_adapter = inject_then_seed
    try:
        model.add_weighted_adapter(
            list(NAMES),
            list(combination.weights),
            combination.how,
            combination_type=combination.peft_type,
            svd_rank=combination.rank,
            density=combination.density,
            majority_sign_method=combination.majority_sign,
        )
    finally:
        del lora.inject_adapter
    return combination.how


def compare_with_peft(ranks: tuple[int, int, int], combination: Combination) -> int:
    """Every LoRA layer of PEFT's combined adapter against `combine_lora`; the layers seen."""
    model = peft_sources(ranks)
    combined = peft_combined(model, combination)
    generator = torch.Generator().manual_seed(SEED)
    rank = result_rank(ranks, combination)
    seen = 0
    for name, layer in lora_layers(model):
        if combined not in layer.lora_A:
            continue
        present = [i for i, source in enumerate(NAMES) if source in layer.lora_A]
        pairs = [
            (layer.lora_A[s].weight, layer.lora_B[s].weight, layer.scaling[s])
            for s in (NAMES[i] for i in present)
        ]
        a, b = combine_lora(pairs, combination, generator, sources=present, rank=rank)
        expected_a, expected_b = layer.lora_A[combined].weight, layer.lora_B[combined].weight
        torch.testing.assert_close(a, expected_a, atol=1e-5, rtol=1e-5, msg=name)
        torch.testing.assert_close(b, expected_b, atol=1e-5, rtol=1e-5, msg=name)
        delta = layer.get_delta_weight(combined)
        torch.testing.assert_close(b @ a, delta, atol=1e-5, rtol=1e-5, msg=name)
        assert delta.abs().max() > 0, name
        seen += 1
    return seen


def combination_for(how: str, rank: int | None = 4, **options: Any) -> Combination:
    """`how` over WEIGHTS: density 0.5 where it prunes, `rank` where it is an svd how, the
    seed SEED where it draws masks."""
    density = 0.5 if how in PRUNING else None
    svd = how == "svd" or how.endswith("_svd")
    seed = SEED if how.startswith("dare") else 0
    return Combination(
        how, WEIGHTS, density=density, rank=rank if svd else None, seed=seed, **options
    )


@pytest.mark.parametrize("how", HOWS)
def test_every_how_gives_peft_s_lora_pairs(how: str) -> None:
    assert compare_with_peft((4, 4, 4), combination_for(how)) == 2 * 3  # q, v, o in 2 blocks


@pytest.mark.parametrize("how", ["ties", "dare_ties", "ties_svd"])
def test_the_frequency_sign_election_gives_peft_s_pairs(how: str) -> None:
    combination = combination_for(how, majority_sign="frequency")
    assert compare_with_peft((4, 4, 4), combination) == 6


@pytest.mark.parametrize("how", ["linear", "cat", "svd", "ties_svd", "dare_linear_svd"])
def test_sources_of_different_ranks_give_peft_s_pairs(how: str) -> None:
    assert compare_with_peft((2, 4, 6), combination_for(how, rank=None)) == 6


def test_different_ranks_are_refused_where_a_and_b_merge_apart() -> None:
    use = r"ranks 4, 8; use linear \(the exact weighted sum\) or"
    with pytest.raises(ConfigError, match=f"{use} ties_svd") as caught:
        result_rank([4, 8], Combination("ties", (1.0, 1.0), density=0.5))
    assert "\n" not in str(caught.value)
    a, b = torch.ones(4, 6), torch.ones(5, 4)
    peft_linear = Combination("peft_linear", (1.0, 1.0))
    with pytest.raises(ConfigError, match=f"{use} svd"):
        combine_lora([(a, b, 1.0), (torch.ones(8, 6), torch.ones(5, 8), 1.0)], peft_linear, None)
    assert result_rank([4, 8], lin(2)) == result_rank([4, 8], Combination("cat", (1.0, 1.0))) == 12
    assert result_rank([4, 8], Combination("svd", (1.0, 1.0))) == 8
    assert result_rank([4, 8], Combination("svd", (1.0, 1.0), rank=2)) == 2


def lin(count: int, *weights: float) -> Combination:
    """linear over `count` sources (weights 1 unless given)."""
    return Combination("linear", weights or (1.0,) * count)


def test_ties_elects_a_sign_and_drops_the_sources_against_it() -> None:
    tensors = [torch.tensor([1.0, 2.0]), torch.tensor([3.0, -1.0]), torch.tensor([-0.5, -0.5])]
    total = Combination("ties", (1.0, 1.0, 1.0), density=1.0)
    # sums 3.5 and 0.5 elect + twice: the third source is dropped from both entries
    assert torch.allclose(merge_tensors(tensors, (1, 1, 1), total, None), torch.tensor([2.0, 2.0]))
    frequency = Combination("ties", (1.0, 1.0, 1.0), density=1.0, majority_sign="frequency")
    # signs (+, +, -) and (+, -, -): the first entry keeps a and b, the second b and c
    merged = merge_tensors(tensors, (1, 1, 1), frequency, None)
    assert torch.allclose(merged, torch.tensor([2.0, -0.75]))
    weighted = merge_tensors(tensors, (2, 1, 1), total, None)
    assert torch.allclose(weighted, torch.tensor([2.5, 4.0]))  # weights do not vote


def test_magnitude_trim_keeps_the_largest_entries_of_each_source() -> None:
    tensor = torch.tensor([[1.0, -4.0], [2.0, -3.0]])
    pruned = Combination("magnitude_prune", (1.0,), density=0.5)
    kept = merge_tensors([tensor], (2.0,), pruned, None)
    assert torch.equal(kept, torch.tensor([[0.0, -8.0], [0.0, -6.0]]))
    ties = Combination("ties", (1.0, 1.0), density=0.25)
    other = torch.tensor([[5.0, 0.0], [0.0, 0.0]])
    assert torch.equal(
        merge_tensors([tensor, other], (1, 1), ties, None), torch.tensor([[5.0, -4.0], [0, 0]])
    )


def test_magnitude_trim_keeps_exactly_its_share_when_magnitudes_tie() -> None:
    tensor = torch.tensor([3.0, -1.0, 1.0, 1.0, -1.0, 0.5])
    pruned = Combination("magnitude_prune", (1.0,), density=0.5)
    kept = merge_tensors([tensor], (1.0,), pruned, None)
    assert int((kept != 0).sum()) == 3
    assert torch.equal(kept, torch.tensor([3.0, -1.0, 1.0, 0.0, 0.0, 0.0]))


@pytest.mark.parametrize("pattern", ["random", "ties", "strided"])
def test_magnitude_trim_of_a_large_tensor_keeps_its_largest_entries(pattern: str) -> None:
    # large enough to be selected from a sample; ties at the cut, and every 4th entry large
    # (a strided sample over-counts them, so its bracket misses and the whole is selected from)
    tensor = torch.randn(600, 700, generator=torch.Generator().manual_seed(0))
    if pattern == "ties":
        tensor = tensor.round()
    elif pattern == "strided":
        tensor.view(-1)[::4] *= 1000
    kept = merge_tensors(
        [tensor], (1.0,), Combination("magnitude_prune", (1.0,), density=0.3), None
    )
    order = tensor.abs().flatten().sort(descending=True, stable=True).indices
    largest = order[: int(0.3 * tensor.numel())]  # the first in flat order where they tie
    expected = torch.zeros(tensor.numel())
    expected[largest] = tensor.flatten()[largest]
    assert torch.equal(kept, expected.view_as(tensor))


def test_density_one_prunes_nothing_and_draws_nothing() -> None:
    tensors = [torch.randn(5, 3, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    linear = merge_tensors(tensors, WEIGHTS, lin(3, *WEIGHTS), None)
    generator = torch.Generator().manual_seed(0)
    state = generator.get_state()
    for how in ("magnitude_prune", "dare_linear"):
        combination = Combination(how, WEIGHTS, density=1.0)
        merged = merge_tensors(tensors, WEIGHTS, combination, generator)
        torch.testing.assert_close(merged, linear)
    assert torch.equal(generator.get_state(), state)


def test_dare_drops_and_rescales_from_its_seed() -> None:
    tensor = torch.randn(40, 30, generator=torch.Generator().manual_seed(1))
    dare = Combination("dare_linear", (1.0,), density=0.25, seed=3)
    first = merge_tensors([tensor], (1.0,), dare, torch.Generator().manual_seed(3))
    again = merge_tensors([tensor], (1.0,), dare, torch.Generator().manual_seed(3))
    assert torch.equal(first, again)
    kept = first != 0
    assert torch.allclose(first[kept], tensor[kept] * 4)
    assert 0.1 < kept.float().mean().item() < 0.4
    other = merge_tensors([tensor], (1.0,), dare, torch.Generator().manual_seed(4))
    assert not torch.equal(first, other)


@pytest.mark.parametrize("how", ["linear", "cat", "svd", "ties", "magnitude_prune_svd"])
def test_a_negative_weight_negates_the_update(how: str) -> None:
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(3, 7, generator=generator), torch.randn(5, 3, generator=generator)
    update = 2.0 * b @ a
    density = 1.0 if how.startswith(("ties", "magnitude")) else None
    added = combine_lora([(a, b, 2.0)], Combination(how, (0.5,), density=density), None)
    taken = combine_lora([(a, b, 2.0)], Combination(how, (-0.5,), density=density), None)
    torch.testing.assert_close(added[1] @ added[0], 0.5 * update)
    torch.testing.assert_close(taken[1] @ taken[0], -0.5 * update)


def test_an_svd_rank_past_the_layer_s_pads_with_zeros() -> None:
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(2, 3, generator=generator), torch.randn(4, 2, generator=generator)
    new_a, new_b = combine_lora([(a, b, 1.0)], Combination("svd", (1.0,), rank=5), None)
    assert new_a.shape == (5, 3) and new_b.shape == (4, 5)
    torch.testing.assert_close(new_b @ new_a, b @ a)
    assert torch.equal(new_a[3:], torch.zeros(2, 3))


def test_half_precision_pairs_combine_in_float32() -> None:
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(2, 3, generator=generator), torch.randn(4, 2, generator=generator)
    pairs = [(a.half(), b.half(), 1.0), (a.half(), b.half(), 3.0)]
    update = b.half().float() @ a.half().float()
    new_a, new_b = combine_lora(pairs, lin(2), None)
    assert new_a.dtype == new_b.dtype == torch.float32
    torch.testing.assert_close(new_b @ new_a, (1 + 3) * update)  # the sum of the updates
    new_a, new_b = combine_lora(pairs, Combination("peft_linear", (1.0, 1.0)), None)
    assert new_a.dtype == new_b.dtype == torch.float32
    # A and B merge apart: (A + sqrt(3) A) and (B + sqrt(3) B), not the sum of the updates
    torch.testing.assert_close(new_b @ new_a, (1 + 3**0.5) ** 2 * update)


@pytest.mark.parametrize("weights", [(0.5, 0.5), (0.7, -1.2, 2.0)])
def test_linear_is_the_weighted_sum_of_the_updates_of_any_ranks(
    weights: tuple[float, ...],
) -> None:
    generator = torch.Generator().manual_seed(0)
    ranks = (4, 8, 2)[: len(weights)]
    scalings = (2.0, 0.5, 1.0)
    pairs = [
        (torch.randn(r, 6, generator=generator), torch.randn(5, r, generator=generator), s)
        for r, s in zip(ranks, scalings, strict=False)
    ]
    a, b = combine_lora(pairs, lin(len(weights), *weights), None)
    expected = sum(w * s * b_ @ a_ for w, (a_, b_, s) in zip(weights, pairs, strict=True))
    assert a.shape == (sum(ranks), 6) and b.shape == (5, sum(ranks))
    torch.testing.assert_close(b @ a, expected, atol=1e-5, rtol=1e-5)
    a, b, scaling = pairs[0]
    same = combine_lora([pairs[0], pairs[0]], lin(2, 0.5, 0.5), None)  # an update and its copy
    torch.testing.assert_close(same[1] @ same[0], scaling * b @ a)


def test_other_parameters_combine_their_change_from_the_base() -> None:
    base = torch.tensor([1.0, 1.0, 1.0])
    tensors = [torch.tensor([3.0, 1.0, 0.0]), torch.tensor([1.0, 5.0, 2.0])]
    average = combine_deltas(tensors, lin(2, 0.5, 0.5), None, base=base)
    assert torch.allclose(average, torch.tensor([2.0, 3.0, 1.0]))
    ties = Combination("ties", (1.0, 1.0), density=1.0)
    # deltas (2, 0, -1) and (0, 4, 1): the third entry's sum 0 elects +, so only b's 1 counts
    assert torch.allclose(combine_deltas(tensors, ties, None, base=base), torch.tensor([3, 5, 2.0]))
    present = combine_deltas(tensors[1:], lin(2, 0.5, 2.0), None, base=base, sources=[1])
    assert torch.allclose(present, torch.tensor([1.0, 9.0, 3.0]))
    assert torch.allclose(combine_deltas(tensors, lin(2, 1.0, -1.0), None), tensors[0] - tensors[1])


@pytest.mark.parametrize("how", ["cat", "peft_linear", "svd", "ties_svd"])
def test_other_parameters_refuse_the_lora_only_hows(how: str) -> None:
    density = 0.5 if how == "ties_svd" else None
    with pytest.raises(ConfigError, match=f"how {how} combines LoRA pairs only") as caught:
        combine_deltas([torch.ones(3)], Combination(how, (1.0,), density=density), None)
    assert "\n" not in str(caught.value)


def test_sources_that_do_not_fit_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="2 weights for 3 sources"):
        merge_tensors([torch.ones(2)] * 3, (1.0, 1.0), lin(2), None)
    with pytest.raises(ConfigError, match=r"differ in shape \(\(2,\), \(3,\)\)"):
        merge_tensors([torch.ones(2), torch.ones(3)], (1.0, 1.0), lin(2), None)
    with pytest.raises(ConfigError, match=r"do not fit one layer \(A \(2, 3\) B \(4, 2\), A"):
        combine_lora(
            [(torch.ones(2, 3), torch.ones(4, 2), 1.0), (torch.ones(2, 5), torch.ones(4, 2), 1.0)],
            lin(2),
            None,
        )
    with pytest.raises(ConfigError, match="1 weights for 2 sources"):
        combine_lora([(torch.ones(2, 3), torch.ones(4, 2), 1.0)] * 2, lin(1), None)


BAD_OPTIONS = [
    ({"how": "average"}, "how 'average' is unknown; hows: linear, peft_linear, cat, svd"),
    ({"weights": ()}, "weights must be a list of at least one number"),
    ({"weights": "12"}, "weights must be a list of at least one number"),
    ({"weights": (1.0, float("nan"))}, "weights must be finite numbers, got nan (weight 2)"),
    ({"weights": (float("inf"),)}, "weights must be finite numbers, got inf"),
    ({"weights": (1e39,)}, "weights must be finite numbers, got 1e+39"),
    ({"weights": (True,)}, "weights must be finite numbers, got True"),
    ({"weights": ("1",)}, "weights must be finite numbers, got '1'"),
    ({"weights": (0.0, -0.0)}, "weights are all zero"),
    ({"how": "ties"}, "how ties needs a density"),
    ({"how": "ties", "density": 0.0}, "density must be a number in (0, 1], got 0.0"),
    ({"how": "dare_linear", "density": 1.5}, "density must be a number in (0, 1], got 1.5"),
    ({"how": "ties", "density": float("nan")}, "density must be a number in (0, 1], got nan"),
    ({"how": "ties", "density": True}, "density must be a number in (0, 1], got True"),
    ({"density": 0.5}, "density applies to ties, dare and magnitude_prune hows, not to linear"),
    ({"how": "cat", "density": 0.5}, "density applies to ties, dare and magnitude_prune hows"),
    ({"rank": 4}, "rank applies to svd hows only, not to linear"),
    ({"how": "svd", "rank": 0}, "rank must be a positive integer, got 0"),
    ({"how": "svd", "rank": 2.0}, "rank must be a positive integer, got 2.0"),
    ({"how": "svd", "rank": True}, "rank must be a positive integer, got True"),
    ({"majority_sign": "median"}, "majority_sign must be one of total, frequency, got 'median'"),
    ({"majority_sign": "frequency"}, "majority_sign applies to ties hows only, not to linear"),
    ({"seed": -1}, "seed must be an integer from 0 to"),
    ({"how": "dare_ties", "density": 0.5, "seed": 2**40}, "seed must be an integer from 0 to"),
    ({"seed": 3}, "seed applies to dare hows only"),
]


@pytest.mark.parametrize(("options", "needle"), BAD_OPTIONS)
def test_a_bad_combination_is_refused_in_one_line(options: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Combination(**{"how": "linear", "weights": (1.0, 2.0), **options})
    message = str(caught.value)
    assert message.startswith("combine: ") and needle in message
    assert "\n" not in message


def test_a_combination_writes_json_and_reads_back() -> None:
    combination = Combination("dare_ties_svd", [1, -0.5], density=0.3, rank=2, seed=4)  # type: ignore[arg-type]
    assert combination.weights == (1.0, -0.5)
    written = json.loads(json.dumps(combination.to_dict()))
    assert Combination(**written) == combination
    assert (combination.random, combination.svd, combination.rule) == (True, True, "dare_ties")
    assert Combination("svd", (1.0,)).rule == Combination("peft_linear", (1.0,)).rule == "linear"
    assert (lin(1).peft_type, Combination("peft_linear", (1.0,)).peft_type) == ("cat", "linear")
    assert Combination("peft_linear", (1.0,)).lora_only and not lin(1).lora_only
    assert not Combination("ties", (1.0,), density=0.5).random
