// SPDX-License-Identifier: GPL-2.0
// bsprun --help: the manual page's sections after the options (help.cpp).
#pragma once

namespace ghost::bsp {

extern const char* const kBsprunFooter;

} // namespace ghost::bsp
