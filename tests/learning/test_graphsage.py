"""SAGELayer against torch-geometric's SAGEConv, its independent reference: same draws and bits."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.nn import SAGEConv

from graphopt.learning.encoders.graphsage import GraphSAGEEncoder, SAGELayer


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("hidden", [1, 8, 64])
def test_a_layer_draws_and_computes_what_sageconv_does(seed: int, hidden: int) -> None:
    torch.manual_seed(seed)
    reference = SAGEConv(hidden, hidden, aggr="max", project=True, normalize=True)
    after_reference = torch.rand(3)
    torch.manual_seed(seed)
    layer = SAGELayer(hidden)
    assert torch.equal(torch.rand(3), after_reference)  # the same random stream consumed
    expected, ours = reference.state_dict(), layer.state_dict()
    assert list(ours) == [k for k in expected if k in ours] and set(ours) == set(expected)
    assert all(torch.equal(ours[k], expected[k]) for k in expected)
    generator = torch.Generator().manual_seed(seed)
    n = 1 + 3 * seed
    x = torch.randn(n, hidden, generator=generator, requires_grad=True)
    edges = torch.randint(0, n, (2, 4 * n), generator=generator)
    edges = edges[:, edges[1] != 0]  # node 0 has no neighbour: its pooled state is 0
    x_reference = x.detach().clone().requires_grad_(True)
    out, out_reference = layer(x, edges), reference(x_reference, edges)
    assert torch.equal(out, out_reference)
    out.square().sum().backward()
    out_reference.square().sum().backward()
    assert torch.equal(x.grad, x_reference.grad)
    for name, parameter in layer.named_parameters():
        assert torch.equal(parameter.grad, dict(reference.named_parameters())[name].grad)


def test_a_shipped_checkpoint_loads_into_the_encoder_unchanged() -> None:
    from graphopt.learning.formats import shipped_policy_path
    from graphopt.learning.saving import read_checkpoint
    from graphopt.learning.systems.gdp.config import GDP_FORMAT

    state = read_checkpoint(shipped_policy_path("gdp", "makespan"), GDP_FORMAT)["model_state"]
    encoder = {k[len("encoder.") :]: v for k, v in state.items() if k.startswith("encoder.")}
    layers = 1 + max(int(k.split(".")[1]) for k in encoder if k.startswith("layers."))
    features, hidden = encoder["input.0.weight"].shape[1], encoder["input.0.weight"].shape[0]
    model = GraphSAGEEncoder(features, hidden, layers)
    model.load_state_dict(encoder)  # strict: the same names and shapes
