/* Lane-blocked within-turn pass of the Yahtzee oracle (_kernels.solve, the table build) and of a
 * turn-perfect agent (_occupancy.evaluate), through _blocked_turn.pxi.
 *
 * One boundary group (filled boxes, Yahtzee box) has up to 64 lanes, one per capped upper
 * subtotal. Here a turn is run for a block of 8 lanes at a time: every table row is 8 doubles,
 * held as YB_NV native vectors (GCC vector extensions: one AVX-512 register, two AVX registers or
 * four SSE2 registers, whatever the build targets), so the working set of a turn (one to three
 * tables of 462 keeps) stays in the first two cache levels and every loop is an explicit vector loop.
 *
 * Tables: AW the agent's valuation W, AT the true expected points, IB the index of the agent's
 * best keep (as a double, so that it moves with the values), each 462 rows of 8 lanes: keeps of
 * 0..4 dice at rows 0..209, rolls (keeps of 5 dice) at rows 210..461 in yamblab.games.dice order.
 *
 * The agent's arithmetic is exactly that of the reference kernel (_kernels.evaluate_policy):
 * the same sums in the same order and a division by 6, so its choices and their ties are the
 * same. The true values, which decide nothing, are averaged with a multiplication by 1/6
 * (cheaper than a division; they agree with the reference to about 1e-12 points).
 */
#ifndef YAMBLAB_BLOCKED_TURN_H
#define YAMBLAB_BLOCKED_TURN_H

#include <math.h>
#include <stdint.h>

#if defined(__AVX512F__)
#define YB_VBYTES 64
#elif defined(__AVX__)
#define YB_VBYTES 32
#else
#define YB_VBYTES 16
#endif
#define YB_NV (64 / YB_VBYTES)     /* native vectors per row of 8 lanes */
#define YB_W (YB_VBYTES / 8)        /* doubles per native vector */

typedef double yb_vd __attribute__((vector_size(YB_VBYTES)));
typedef long long yb_vl __attribute__((vector_size(YB_VBYTES)));

static inline yb_vd yb_select(yb_vl m, yb_vd a, yb_vd b) {
    return (yb_vd)(((yb_vl)a & m) | ((yb_vl)b & ~m));
}

static inline yb_vd yb_splat(double x) {
    const yb_vd zero = {0};
    return zero + x;        /* GCC broadcasts the scalar (x is never -0.0 here) */
}

/* Final roll: AW / AT rows 210 + r = the best source by W (ties to the first in card order)
 * plus the Yahtzee bonus of the roll. Sources are 8-lane rows of GW / GT (points and next value
 * of an upper box by count of its face, or next value of a lower box); add[r][k] are the points
 * added to source k of roll r. */
static inline void yb_final_roll(double* aw, double* at, const double* gw, const double* gt,
                                 const int* nbox, const int (*src)[13], const double (*add)[13],
                                 const double* ybon) {
    yb_vd* AW = (yb_vd*)aw;
    yb_vd* AT = (yb_vd*)at;
    const yb_vd* GW = (const yb_vd*)gw;
    const yb_vd* GT = (const yb_vd*)gt;
    const yb_vd ninf = yb_splat(-INFINITY);
    for (int r = 0; r < 252; r++) {
        yb_vd bw[YB_NV], bt[YB_NV];
        for (int h = 0; h < YB_NV; h++) bw[h] = bt[h] = ninf;
        for (int k = 0; k < nbox[r]; k++) {
            double a = add[r][k];
            int q = src[r][k] * YB_NV;
            for (int h = 0; h < YB_NV; h++) {
                yb_vd v = a + GW[q + h];
                yb_vl m = v > bw[h];
                bw[h] = yb_select(m, v, bw[h]);
                bt[h] = yb_select(m, a + GT[q + h], bt[h]);
            }
        }
        for (int h = 0; h < YB_NV; h++) {
            AW[(210 + r) * YB_NV + h] = bw[h] + ybon[r];
            AT[(210 + r) * YB_NV + h] = bt[h] + ybon[r];
        }
    }
}

/* Keep values for keeps of 4 dice down to 0 (sum of the 6 keeps one die larger, / 6). */
static inline yb_vd yb_sum6(const yb_vd* A, const int32_t* a, int h) {
    /* the six keeps one die larger, summed left to right (the reference's order) */
    return A[a[0] * YB_NV + h] + A[a[1] * YB_NV + h] + A[a[2] * YB_NV + h]
           + A[a[3] * YB_NV + h] + A[a[4] * YB_NV + h] + A[a[5] * YB_NV + h];
}

static inline void yb_average(yb_vd* AW, const int32_t (*kadd)[6]) {
    for (int k = 209; k >= 0; k--)
        for (int h = 0; h < YB_NV; h++) AW[k * YB_NV + h] = yb_sum6(AW, kadd[k], h) / 6.0;
}

/* One keep decision. First both tables are averaged over the next die, for keeps of 4 dice
 * down to 0 (kadd[k][f]: the keep k plus a die of face f). Then, in place and in index order,
 * every keep takes the best of itself and its sub-keeps by W (ksub[k][f]: k less one die of
 * face f, -1 if none; sub-keeps have lower indices, so they are final when k is reached), ties
 * to the lowest keep index, carrying the T value of the winner. Afterwards rows 210 + r hold
 * the W and T values of the agent's keep of roll r. */
static inline void yb_keep_stage(double* aw, double* at, double* ib, const int32_t (*kadd)[6],
                                 const int32_t (*ksub)[6]) {
    yb_vd* AW = (yb_vd*)aw;
    yb_vd* AT = (yb_vd*)at;
    yb_vd* IB = (yb_vd*)ib;
    for (int k = 209; k >= 0; k--) {
        const int32_t* a = kadd[k];
        for (int h = 0; h < YB_NV; h++) {
            AW[k * YB_NV + h] = yb_sum6(AW, a, h) / 6.0;
            AT[k * YB_NV + h] = yb_sum6(AT, a, h) * (1.0 / 6.0);
        }
    }
    for (int h = 0; h < YB_NV; h++) IB[h] = yb_splat(0.0);
    for (int k = 1; k < 462; k++) {
        yb_vd bw[YB_NV], bt[YB_NV], bi[YB_NV];
        for (int h = 0; h < YB_NV; h++) {
            bw[h] = AW[k * YB_NV + h];
            bt[h] = AT[k * YB_NV + h];
            bi[h] = yb_splat((double)k);
        }
        const int32_t* s = ksub[k];
        for (int f = 0; f < 6; f++) {
            int q = s[f];
            if (q < 0) continue;
            q *= YB_NV;
            for (int h = 0; h < YB_NV; h++) {
                yb_vd v = AW[q + h], ii = IB[q + h];
                yb_vl m = (v > bw[h]) | ((v == bw[h]) & (ii < bi[h]));
                bw[h] = yb_select(m, v, bw[h]);
                bt[h] = yb_select(m, AT[q + h], bt[h]);
                bi[h] = yb_select(m, ii, bi[h]);
            }
        }
        for (int h = 0; h < YB_NV; h++) {
            AW[k * YB_NV + h] = bw[h];
            AT[k * YB_NV + h] = bt[h];
            IB[k * YB_NV + h] = bi[h];
        }
    }
}

/* Value before the first roll: sum over rolls of P(roll) * AT row 210 + r; lanes 0..n-1 to out. */
static inline void yb_first_roll(const double* at, const double* proll, double* out, int n) {
    const yb_vd* AT = (const yb_vd*)at;
    yb_vd acc[YB_NV];
    for (int h = 0; h < YB_NV; h++) acc[h] = yb_splat(0.0);
    for (int r = 0; r < 252; r++)
        for (int h = 0; h < YB_NV; h++) acc[h] += proll[r] * AT[(210 + r) * YB_NV + h];
    for (int j = 0; j < n; j++) out[j] = acc[j / YB_W][j % YB_W];
}

/* The oracle's own pass (the build): the same turn with the best choice by one table only. */

/* Final roll: AW rows 210 + r = the best source + the Yahtzee bonus of the roll. */
static inline void yb_final_roll_max(double* aw, const double* gw, const int* nbox,
                                     const int (*src)[13], const double (*add)[13],
                                     const double* ybon) {
    yb_vd* AW = (yb_vd*)aw;
    const yb_vd* GW = (const yb_vd*)gw;
    const yb_vd ninf = yb_splat(-INFINITY);
    for (int r = 0; r < 252; r++) {
        yb_vd bw[YB_NV];
        for (int h = 0; h < YB_NV; h++) bw[h] = ninf;
        for (int k = 0; k < nbox[r]; k++) {
            double a = add[r][k];
            int q = src[r][k] * YB_NV;
            for (int h = 0; h < YB_NV; h++) {
                yb_vd v = a + GW[q + h];
                bw[h] = yb_select(v > bw[h], v, bw[h]);
            }
        }
        for (int h = 0; h < YB_NV; h++) AW[(210 + r) * YB_NV + h] = bw[h] + ybon[r];
    }
}

/* One keep decision of the oracle: average, then in place the best sub-keep of every keep (its
 * value only); afterwards rows 210 + r hold the value of the best keep of roll r. */
static inline void yb_keep_stage_max(double* aw, const int32_t (*kadd)[6], const int32_t (*ksub)[6]) {
    yb_vd* AW = (yb_vd*)aw;
    yb_average(AW, kadd);
    for (int k = 1; k < 462; k++) {
        yb_vd bw[YB_NV];
        for (int h = 0; h < YB_NV; h++) bw[h] = AW[k * YB_NV + h];
        const int32_t* s = ksub[k];
        for (int f = 0; f < 6; f++) {
            int q = s[f];
            if (q < 0) continue;
            q *= YB_NV;
            for (int h = 0; h < YB_NV; h++) {
                yb_vd v = AW[q + h];
                bw[h] = yb_select(v > bw[h], v, bw[h]);
            }
        }
        for (int h = 0; h < YB_NV; h++) AW[k * YB_NV + h] = bw[h];
    }
}

/* Value before the first roll: the keep averages down to the empty keep; lanes 0..n-1 to out. */
static inline void yb_average_to_empty(double* aw, const int32_t (*kadd)[6], double* out, int n) {
    yb_vd* AW = (yb_vd*)aw;
    yb_average(AW, kadd);
    for (int j = 0; j < n; j++) out[j] = AW[j / YB_W][j % YB_W];
}

#endif
