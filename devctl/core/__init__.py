"""The use-cases: reading the node, following it, and the values they hand to every face."""
