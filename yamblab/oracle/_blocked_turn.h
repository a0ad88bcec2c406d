/* Lane-blocked within-turn pass of a turn-perfect agent (used by _occupancy.evaluate).
 *
 * One boundary group (filled boxes, Yahtzee box) has up to 64 lanes, one per capped upper
 * subtotal. Here a turn is run for a block of 8 lanes at a time: every table row is one
 * 8-double vector (GCC vector extensions: one AVX-512 register, two AVX2 registers, or four SSE2
 * registers, whatever the target has), so the working set of a turn (three tables of 462 keeps)
 * stays in the first two cache levels and every loop is an explicit vector loop.
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

typedef double yb_v8d __attribute__((vector_size(64)));
typedef long long yb_v8l __attribute__((vector_size(64)));

static inline yb_v8d yb_select(yb_v8l m, yb_v8d a, yb_v8d b) {
    return (yb_v8d)(((yb_v8l)a & m) | ((yb_v8l)b & ~m));
}

/* Final roll: AW / AT rows 210 + r = the best source by W (ties to the first in card order)
 * plus the Yahtzee bonus of the roll. Sources are 8-lane rows of GW / GT (points and next value
 * of an upper box by count of its face, or next value of a lower box); add[r][k] are the points
 * added to source k of roll r. */
static inline void yb_final_roll(double* aw, double* at, const double* gw, const double* gt,
                                 const int* nbox, const int (*src)[13], const double (*add)[13],
                                 const double* ybon) {
    yb_v8d* AW = (yb_v8d*)aw;
    yb_v8d* AT = (yb_v8d*)at;
    const yb_v8d* GW = (const yb_v8d*)gw;
    const yb_v8d* GT = (const yb_v8d*)gt;
    const yb_v8d ninf = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                         -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    for (int r = 0; r < 252; r++) {
        yb_v8d bw = ninf, bt = ninf;
        for (int k = 0; k < nbox[r]; k++) {
            double a = add[r][k];
            yb_v8d v = a + GW[src[r][k]];
            yb_v8l m = v > bw;
            bw = yb_select(m, v, bw);
            bt = yb_select(m, a + GT[src[r][k]], bt);
        }
        AW[210 + r] = bw + ybon[r];
        AT[210 + r] = bt + ybon[r];
    }
}

/* One keep decision. First both tables are averaged over the next die, for keeps of 4 dice
 * down to 0 (kadd[k][f]: the keep k plus a die of face f). Then, in place and in index order,
 * every keep takes the best of itself and its sub-keeps by W (ksub[k][f]: k less one die of
 * face f, -1 if none; sub-keeps have lower indices, so they are final when k is reached), ties
 * to the lowest keep index, carrying the T value of the winner. Afterwards rows 210 + r hold
 * the W and T values of the agent's keep of roll r. */
static inline void yb_keep_stage(double* aw, double* at, double* ib, const int32_t (*kadd)[6],
                                 const int32_t (*ksub)[6]) {
    yb_v8d* AW = (yb_v8d*)aw;
    yb_v8d* AT = (yb_v8d*)at;
    yb_v8d* IB = (yb_v8d*)ib;
    for (int k = 209; k >= 0; k--) {
        const int32_t* a = kadd[k];
        AW[k] = (AW[a[0]] + AW[a[1]] + AW[a[2]] + AW[a[3]] + AW[a[4]] + AW[a[5]]) / 6.0;
        AT[k] = (AT[a[0]] + AT[a[1]] + AT[a[2]] + AT[a[3]] + AT[a[4]] + AT[a[5]]) * (1.0 / 6.0);
    }
    IB[0] = (yb_v8d){0, 0, 0, 0, 0, 0, 0, 0};
    for (int k = 1; k < 462; k++) {
        yb_v8d bw = AW[k], bt = AT[k];
        double kk = (double)k;
        yb_v8d bi = {kk, kk, kk, kk, kk, kk, kk, kk};
        const int32_t* s = ksub[k];
        for (int f = 0; f < 6; f++) {
            int q = s[f];
            if (q < 0) continue;
            yb_v8d v = AW[q], ii = IB[q];
            yb_v8l m = (v > bw) | ((v == bw) & (ii < bi));
            bw = yb_select(m, v, bw);
            bt = yb_select(m, AT[q], bt);
            bi = yb_select(m, ii, bi);
        }
        AW[k] = bw;
        AT[k] = bt;
        IB[k] = bi;
    }
}

/* Value before the first roll: sum over rolls of P(roll) * AT row 210 + r; lanes 0..n-1 to out. */
static inline void yb_first_roll(const double* at, const double* proll, double* out, int n) {
    const yb_v8d* AT = (const yb_v8d*)at;
    yb_v8d acc = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int r = 0; r < 252; r++) acc += proll[r] * AT[210 + r];
    for (int j = 0; j < n; j++) out[j] = acc[j];
}

#endif
