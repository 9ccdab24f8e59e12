"""irfuse: a torch.compile backend that fuses LLM-serving patterns as xDSL IR rewrites.

Inside vLLM (already imported), `irfuse.vllm_pass` is the post-grad pass that vLLM's
`inductor_passes` names as `"irfuse.vllm_pass"` (vLLM looks the name up in this namespace);
nothing else is imported here.
"""

import sys

if "vllm" in sys.modules:  # only inside vLLM: importing irfuse elsewhere stays free of vLLM
    try:
        from irfuse.vllm_plugin import vllm_pass  # noqa: F401
    except ImportError:  # a vLLM without the pass API irfuse uses: the name stays unbound
        pass
