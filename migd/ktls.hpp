// SPDX-License-Identifier: GPL-2.0
// Kernel TLS (the record layer in the kernel, SSL_OP_ENABLE_KTLS) for the
// transport benchmark and for the measurements in Documentation/performance.md.
// Off by default: migd uses OpenSSL's record layer (see tls.cpp).
#pragma once

#include <string>

#include "channel.hpp"

namespace migd {

// Asks OpenSSL for kernel TLS on the connections ctx makes or accepts from
// now on. OpenSSL falls back to its own record layer when the kernel (TCP
// ULP "tls") or the cipher cannot do it.
void set_ktls(TlsContext& ctx, bool on);

struct KtlsState {
    bool send = false, receive = false;
};
// Whether the channel's records are sealed (send) and opened (receive) by the
// kernel; both false for plain channels.
KtlsState ktls_state(const Channel& ch);

// Whether the kernel lists the "tls" TCP ULP as loaded
// (/proc/sys/net/ipv4/tcp_available_ulp; a module not yet loaded is not
// listed), and whether this OpenSSL was built with kernel TLS.
bool kernel_has_tls_ulp();
bool openssl_has_ktls();

} // namespace migd
