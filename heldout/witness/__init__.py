"""Witnesses over HTTP: the C2SP tlog-witness server (``server``) and the operator's side (``operator``): which
witnesses a store uses, sending them every new checkpoint, storing their cosignatures in the ledger."""
