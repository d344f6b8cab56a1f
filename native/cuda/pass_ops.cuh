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
    OP_GEMV,         // k_gemv<MT, RPW, PRO>
    OP_GEMV_GLU,     // k_gemv_glu: FFN gate / up with SwiGLU and its quantization (M=1)
    OP_DELTANET,     // k_deltanet
    OP_DELTANET_HEAD, // k_deltanet_head: M=1, with the gated norm and its quantization
    OP_QKPREP,       // k_qkprep
    OP_ATTN_SCORES,  // k_attn_scores
    OP_ATTN_VALUES,  // k_attn_values
    OP_LM_HEAD,      // k_lm_head<QT>: the M=1 LM head streamed by a resident grid
    OP_PIECE_DONE,   // no kernel: the event lm_piece_done[piece] (a piece of the LM head is done)
};

struct PassOp {
    int kind;
    int gx, gy, gz;  // blocks
    int threads;     // threads of a block, as a kernel of its own
    int smem;        // dynamic shared memory of a block
    int MT, RPW;     // OP_GEMV: the instance
    int piece;       // OP_PIECE_DONE
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
