"""The dialect-agnostic machinery irfuse's dialects declare their ops with, kept apart from the
dialects as xDSL keeps `irdl/` apart from `dialects/`: nothing here imports a dialect.

- `syntax`: `NamedOperandSyntax`, the custom form and the constructor every semantic and fused op
  derives from its definition, and the property-value helpers;
- `decomposition`: the `decomposition` region of a raised op, its trait, and the helpers that
  move a chain of ops into it (`outline`) and back (`inline_decomposition`);
- `call_syntax`, `call_args`: `CallLikeOp`, the syntax of a call to a torch callable
  (`aten.call`, `kernel.call`), and the attributes of its argument template;
- `attr_syntax`: the parameter syntax attributes and types share (strings, tensor dims);
- `shapes`: the dim and dtype checks verifiers share;
- `dialect`: `declared_dialect`, a dialect made of the ops and attributes a module declares.
"""
