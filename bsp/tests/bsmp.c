/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Conformance of bulk synchronous message passing: messages sent in
 * superstep i are read in i+1, in order by source pid then send order;
 * bsp_qsize counts messages and payload bytes; bsp_get_tag, bsp_move
 * (truncating to the reception size), bsp_hpmove; the queue is emptied by
 * the next sync; a tag size set in superstep i applies to messages sent from
 * i+1 on (a message keeps the tag size it was sent with). Every pair
 * exchanges numbered messages for ROUNDS supersteps, so with bsprun
 * --migrate-every 1 messages to and from a moving VP are checked: none lost,
 * none duplicated, order per pair kept. Every pid prints "bsmp pid N ok".
 */
#include <stdio.h>
#include <string.h>

#include "bsp.h"
#include "check.h"

#define ROUNDS 12
#define PER_PAIR 3

struct msg {
    int src, round, seq;
    char fill[20];
};

int main(int argc, char** argv) {
    bsp_begin(test_nprocs(argc, argv));
    int p = bsp_nprocs(), s = bsp_pid(), n, bytes, status;

    /* Tag size: 0 at first; setting 4 returns the old size, 0. */
    int ts = sizeof(int);
    bsp_set_tagsize(&ts);
    CHECK(ts == 0);
    /* Sent in this superstep: still with tag size 0. */
    bsp_send((s + 1) % p, NULL, "abc", 3);
    bsp_sync();
    bsp_qsize(&n, &bytes);
    CHECK(n == 1 && bytes == 3);
    int tag = 12345;
    bsp_get_tag(&status, &tag);
    CHECK(status == 3);
    CHECK(tag == 12345); /* a 0-byte tag copies nothing */
    char small[2] = {0, 0};
    bsp_move(small, 2); /* truncated to the reception size */
    CHECK(small[0] == 'a' && small[1] == 'b');
    bsp_qsize(&n, &bytes);
    CHECK(n == 0 && bytes == 0);
    bsp_get_tag(&status, &tag);
    CHECK(status == -1);

    /* Now tags are 4 bytes. A message to self too. */
    int t = 700 + s;
    bsp_send(s, &t, "self", 4);
    bsp_send((s + 1) % p, &t, "", 0);
    bsp_sync();
    bsp_qsize(&n, &bytes);
    CHECK(n == (p == 1 ? 2 : 2));
    int seen_self = 0, seen_prev = 0;
    for (int i = 0; i < n; i++) {
        void *tp, *pp;
        int len = bsp_hpmove(&tp, &pp);
        CHECK(len >= 0);
        int tg;
        memcpy(&tg, tp, sizeof tg);
        if (len == 4 && tg == 700 + s && memcmp(pp, "self", 4) == 0)
            seen_self++;
        else if (len == 0 && tg == 700 + (s - 1 + p) % p)
            seen_prev++;
    }
    CHECK(seen_self == 1 && seen_prev == 1);
    {
        void *tp, *pp;
        CHECK(bsp_hpmove(&tp, &pp) == -1);
    }

    /* Unread messages do not survive the next sync. */
    bsp_send(s, &t, "x", 1);
    bsp_sync();
    bsp_sync();
    bsp_qsize(&n, &bytes);
    CHECK(n == 0);

    /* Numbered messages between every pair, over many supersteps. */
    for (int r = 0; r < ROUNDS; r++) {
        for (int d = 0; d < p; d++)
            for (int k = 0; k < PER_PAIR; k++) {
                struct msg m = {s, r, k, "payload"};
                int tg = s * 1000 + k;
                bsp_send(d, &tg, &m, sizeof m);
            }
        bsp_sync();
        bsp_qsize(&n, &bytes);
        CHECK(n == p * PER_PAIR);
        CHECK(bytes == p * PER_PAIR * (int)sizeof(struct msg));
        for (int i = 0; i < n; i++) {
            struct msg m;
            int tg;
            bsp_get_tag(&status, &tg);
            CHECK(status == (int)sizeof m);
            bsp_move(&m, sizeof m);
            /* by source pid, then send order */
            CHECK(m.src == i / PER_PAIR && m.seq == i % PER_PAIR);
            CHECK(m.round == r && tg == m.src * 1000 + m.seq);
            CHECK(strcmp(m.fill, "payload") == 0);
        }
    }
    printf("bsmp pid %d ok\n", s);
    bsp_end();
    return 0;
}
