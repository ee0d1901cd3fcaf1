import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graphopt.learning.batching import GraphBatch
from graphopt.learning.encoders.mpnn import MPNNEncoder


def _loop_reference(encoder: MPNNEncoder, batch: GraphBatch, aggregation: str) -> torch.Tensor:
    """Equations 1-5 edge by edge and node by node: forward messages aggregated at each
    edge's target, backward ones at its source, the two aggregates added."""
    h = encoder.node_encoder(batch.x)
    edge_h = encoder.edge_encoder(batch.edge_attr)
    edges = batch.edge_index.T.tolist()

    def aggregate(got: list[torch.Tensor]) -> torch.Tensor:
        if not got:
            return torch.zeros(h.shape[1])
        stacked = torch.stack(got)
        return stacked.mean(0) if aggregation == "mean" else stacked.sum(0)

    for _ in range(encoder.rounds):
        forward = [[] for _ in range(h.shape[0])]
        backward = [[] for _ in range(h.shape[0])]
        for e, (s, t) in enumerate(edges):
            pair = torch.cat([h[s], h[t], edge_h[e]])
            forward[t].append(encoder.forward_messages.message_mlp(pair))
            backward[s].append(encoder.backward_messages.message_mlp(pair))
        messages = torch.stack(
            [aggregate(f) + aggregate(b) for f, b in zip(forward, backward, strict=True)]
        )
        h = encoder.update(torch.cat([h, messages], dim=-1))
    return h


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 9),
    data=st.data(),
    aggregation=st.sampled_from(["mean", "add"]),
)
def test_message_passing_matches_the_edge_by_edge_equations(n, data, aggregation) -> None:
    pairs = [(s, t) for s in range(n) for t in range(s + 1, n)]
    edges = data.draw(st.lists(st.sampled_from(pairs), unique=True) if pairs else st.just([]))
    seed = data.draw(st.integers(0, 2**16))
    torch.manual_seed(seed)
    encoder = MPNNEncoder(5, 2, 8, 3, aggregation)
    edge_index = torch.tensor(edges, dtype=torch.long).reshape(-1, 2).T.contiguous()
    batch = GraphBatch(
        x=torch.randn(n, 5),
        edge_index=edge_index,
        edge_attr=torch.randn(len(edges), 2),
        topological_rank=torch.arange(n),
        batch=torch.zeros(n, dtype=torch.long),
        ptr=torch.tensor([0, n]),
    )
    with torch.no_grad():
        assert torch.allclose(
            encoder(batch), _loop_reference(encoder, batch, aggregation), atol=1e-6
        )
