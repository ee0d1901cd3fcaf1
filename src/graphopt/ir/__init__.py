"""The graph IR: graphs, solutions, formats, generators and conversions."""
