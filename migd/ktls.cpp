// SPDX-License-Identifier: GPL-2.0
// What kernel TLS the system offers (set_ktls and ktls_state are in tls.cpp,
// beside the classes they reach into).
#include "ktls.hpp"

#include <cstdio>
#include <string_view>

#include <openssl/opensslconf.h>

namespace migd {

bool openssl_has_ktls() {
#ifndef OPENSSL_NO_KTLS
    return true;
#else
    return false;
#endif
}

bool kernel_has_tls_ulp() {
    std::FILE* f = std::fopen("/proc/sys/net/ipv4/tcp_available_ulp", "r");
    char buf[256] = {};
    const bool listed = f && std::fgets(buf, sizeof(buf), f) &&
                        std::string_view(buf).find("tls") != std::string_view::npos;
    if (f)
        std::fclose(f);
    return listed;
}

} // namespace migd
