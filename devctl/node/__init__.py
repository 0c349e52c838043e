"""Where things are on the node and how to read them; protobuf stops here."""
