// pass_ops.cuh - a forward pass as a list of ops (forward.cu builds and launches it), each the
// arguments of one kernel and its blocks. A kernel's body is a device function over one block
// (*_device.cuh), so that other executors of the list can run the same bodies, same bytes.
#pragma once
#include "activation.cuh"
#include "attention.cuh"
#include "deltanet.cuh"
#include "matvec.cuh"

enum PassOpKind {
    OP_EMBED,        // k_embed
    OP_ACT,          // k_act
    OP_ACTQ,         // k_actq
    OP_GEMV,         // k_gemv<MT, RPW, PRO>, or k_gemv_wide (RPW 8: a Q4_0 file's M=1 DeltaNet in-proj)
    OP_GEMV_GLU,     // k_gemv_glu: FFN gate / up with SwiGLU and its quantization (M=1)
    OP_DELTANET,     // k_deltanet
    OP_DELTANET_HEAD, // k_deltanet_head: M=1, with the gated norm and its quantization
    OP_QKPREP,       // k_qkprep
    OP_ATTN_SCORES,  // k_attn_scores
    OP_ATTN_VALUES,  // k_attn_values
    OP_LM_HEAD,      // k_lm_head<QT>: the M=1 LM head streamed by a resident grid
    OP_PIECE_DONE,   // no kernel: the event lm_piece_done[piece] (a piece of the LM head is done)
};

// What an op does in the model, set by plan_pass: the groups by which the ablation build
// (ablation.cu) leaves ops out. ROLE_NONE: the piece events, never left out.
enum PassRole {
    ROLE_NONE,
    ROLE_EMBED,      // the embedding rows
    ROLE_NORM,       // an activation op in front of a product (k_actq, k_act): at M=1 the row norms
    ROLE_DN_IN,      // DeltaNet: the in-proj (qkv, z, beta, alpha)
    ROLE_DN_HEAD,    // DeltaNet: the conv, state and gated norm (k_deltanet_head or k_deltanet)
    ROLE_DN_OUT,     // DeltaNet: the out-proj, added to x
    ROLE_ATT_QKV,    // attention: the q (with gate), k and v products
    ROLE_ATT_PREP,   // attention: q / k norms, RoPE and the cache writes
    ROLE_ATT_SCORES, // attention: the scores and their softmax
    ROLE_ATT_VALUES, // attention: the values (and their quantization)
    ROLE_ATT_OUT,    // attention: the out-proj, added to x
    ROLE_FFN_UP,     // FFN: gate and up (with SwiGLU at M=1)
    ROLE_FFN_DOWN,   // FFN: the down product, added to x
    ROLE_LM_HEAD,    // the LM head's products
    ROLE_COUNT
};

struct PassOp {
    int kind;
    int gx, gy, gz;  // blocks
    int threads;     // threads of a block, as a kernel of its own
    int smem;        // dynamic shared memory of a block
    int MT, RPW;     // OP_GEMV: the instance
    int piece;       // OP_PIECE_DONE
    int role;        // PassRole
    bool early;      // OP_GEMV_GLU: k_gemv_glu_early, the down product scheduled at its start
    union {
        EmbedArgs embed;
        ActArgs act;
        GemvArgs gemv;
        GluArgs glu;
        LmHeadArgs lm;
        DeltanetArgs deltanet;
        QkprepArgs qkprep;
        ScoresArgs scores;
        ValuesArgs values;
    };
};

// The ops of one pass of m rows writing slot s.
struct kcuda_model;
int32_t plan_pass(kcuda_model *md, int m, int s, std::vector<PassOp> *ops);

// ablation.cu: in a module built with KITE_CUDA_ABLATION=ON, the ops of the groups that
// KITE_CUDA_ABLATE names are dropped from the plan (a diagnostic of what each group costs; the
// outputs are then wrong). Otherwise, and with the variable unset, the plan is left as it is.
int32_t ablate_pass(int m, int s, std::vector<PassOp> *ops);
// Whether KITE_CUDA_ABLATE also names copy_back, the logits' copies back to the host (passes.cu
// then leaves them out; h_out's stays): set by ablate_pass, false outside the ablation build.
#if KC_ABLATION
bool ablate_copy_back();
#else
inline bool ablate_copy_back() { return false; }
#endif
