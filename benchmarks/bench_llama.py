"""Prompt-processing and grammar cost of llama-cpp-python, in CPU seconds and tokens/s.

Runs in the llama venv (scripts/ci/llama.sh), not agent-eval's:

    ~/.cache/agent-eval/llama-venv/bin/python benchmarks/bench_llama.py MODEL.gguf \
        [--logits-all 0|1] [--flash 0|1] [--threads N] [--gen 0|1]

Evaluates the first --prompt-tokens tokens of README.md twice from an empty cache (pp0,
pp1), then (--gen 1) one named-tool-choice call of chatml-function-calling, the
grammar-constrained path Gemma 3 plays, with its prompt already cached: what is left is
writing plus the grammar filter.  One JSON line, with the load average before and after.
"""
import argparse
import json
import os
import resource
import time
from pathlib import Path

from llama_cpp import Llama

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("--ctx", type=int, default=3072)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--logits-all", type=int, default=1)
ap.add_argument("--flash", type=int, default=0)
ap.add_argument("--ubatch", type=int, default=512)
ap.add_argument("--batch", type=int, default=512)
ap.add_argument("--prompt-tokens", type=int, default=1500)
ap.add_argument("--gen", type=int, default=1)
a = ap.parse_args()

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

llm = Llama(a.model, n_ctx=a.ctx, n_threads=a.threads, n_threads_batch=a.threads,
            logits_all=bool(a.logits_all), flash_attn=bool(a.flash), n_batch=a.batch,
            n_ubatch=a.ubatch, verbose=False, chat_format="chatml-function-calling")
text = open(Path(__file__).resolve().parents[1] / "README.md").read()
toks = llm.tokenize(text.encode())[: a.prompt_tokens]
out = {"model": os.path.basename(a.model), "threads": a.threads, "logits_all": a.logits_all,
       "flash": a.flash, "ubatch": a.ubatch, "load": os.getloadavg()[0]}
for rep in range(2):
    llm.reset()
    c0, w0 = cpu(), time.perf_counter()
    llm.eval(toks)
    c1, w1 = cpu(), time.perf_counter()
    out[f"pp{rep}"] = dict(cpu=round(c1 - c0, 2), wall=round(w1 - w0, 2),
                         tps_wall=round(len(toks) / (w1 - w0), 1),
                         tps_cpu=round(len(toks) / (c1 - c0), 1))
if a.gen:
    tools = [{"type": "function", "function": {"name": "bash", "description": "Run a script.",
              "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                             "required": ["command"]}}}]
    msgs = [{"role": "system", "content": text[:3000]},
            {"role": "user", "content": "List the open attempts of stage S2."}]
    for name, kw in (("named", {"tool_choice": {"type": "function", "function": {"name": "bash"}}}),):
        llm.create_chat_completion(messages=msgs, tools=tools, max_tokens=1, temperature=0, **kw)
        c0, w0 = cpu(), time.perf_counter()
        r = llm.create_chat_completion(messages=msgs, tools=tools, max_tokens=32, temperature=0, **kw)
        c1, w1 = cpu(), time.perf_counter()
        out[f"gen_{name}"] = dict(cpu=round(c1 - c0, 2), wall=round(w1 - w0, 2),
                                  tokens=r["usage"]["completion_tokens"],
                                  args=r["choices"][0]["message"].get("tool_calls", [{}])[0].get("function", {}).get("arguments"))
out["load_end"] = os.getloadavg()[0]
print(json.dumps(out))
