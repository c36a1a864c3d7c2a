// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Stand-ins for glibc's name-service lookups in the fully static programs
 * (ghostctl, the restore stub): see libghost/CMakeLists.txt, "Static
 * programs".
 *
 * libnl-3's address and protocol helpers (nl_addr_info(), nl_ip_proto2str(),
 * nl_str2ip_proto()) call getaddrinfo() and getprotobyname/number(). ghost
 * never calls those helpers, but they sit in the same object files as what
 * it does call, so a static link pulls them in, and with them glibc's NSS
 * code, which a static program cannot use (glibc warns at every link). The
 * linker's --wrap points libnl's references here instead: if one were ever
 * reached it fails plainly rather than loading NSS modules of another glibc.
 */
#include <errno.h>
#include <netdb.h>
#include <stddef.h>

int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res);
struct protoent *__wrap_getprotobyname(const char *name);
struct protoent *__wrap_getprotobynumber(int proto);

int __wrap_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res)
{
	(void)node;
	(void)service;
	(void)hints;
	*res = NULL;
	errno = ENOSYS;
	return EAI_SYSTEM;
}

struct protoent *__wrap_getprotobyname(const char *name)
{
	(void)name;
	return NULL;
}

struct protoent *__wrap_getprotobynumber(int proto)
{
	(void)proto;
	return NULL;
}
