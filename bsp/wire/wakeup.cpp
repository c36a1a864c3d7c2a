// SPDX-License-Identifier: GPL-2.0
// wait_for_wakeup: sigsetjmp, sigsuspend, and a handler that jumps back.
#include "wakeup.hpp"

#include <setjmp.h>
#include <signal.h>

namespace ghost::bsp::wire {

namespace {

sigjmp_buf g_wake;
volatile sig_atomic_t g_armed = 0;

void on_wakeup(int) {
    if (g_armed) {
        g_armed = 0;
        siglongjmp(g_wake, 1);
    }
}

} // namespace

void install_wakeup_handler() {
    struct sigaction sa {};
    sa.sa_handler = on_wakeup;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; // not SA_RESTART: the handler never returns while armed
    sigaction(SIGUSR2, &sa, nullptr);
}

void wait_for_wakeup(const std::function<void()>& before) {
    sigset_t usr2, old;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    sigprocmask(SIG_BLOCK, &usr2, &old);
    install_wakeup_handler();
    // sigsetjmp saves the mask with SIGUSR2 blocked; siglongjmp restores it.
    if (sigsetjmp(g_wake, 1) == 0) {
        g_armed = 1;
        before();
        sigset_t wait = old;
        sigdelset(&wait, SIGUSR2);
        for (;;)
            sigsuspend(&wait);
    }
    sigprocmask(SIG_SETMASK, &old, nullptr);
}

} // namespace ghost::bsp::wire
