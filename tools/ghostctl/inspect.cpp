// SPDX-License-Identifier: GPL-2.0
// inspect: what an image holds, for people (a summary) and scripts (--json).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "ghost/fd.hpp"
#include "ghost/image.hpp"
#include "ghost/process.hpp"
#include "ghost_lock.h"
#include "inspect_parent.hpp"
#include "progress.hpp"

namespace ghostctl {

namespace {

using nlohmann::json;

std::string prot_string(const ghost_vma& v) {
    std::string s;
    s += (v.prot & PROT_READ) ? 'r' : '-';
    s += (v.prot & PROT_WRITE) ? 'w' : '-';
    s += (v.prot & PROT_EXEC) ? 'x' : '-';
    s += (v.flags & GHOST_VMA_SHARED) ? 's' : 'p';
    return s;
}

std::vector<std::string> vma_flag_names(std::uint32_t f) {
    static constexpr std::pair<std::uint32_t, const char*> names[] = {
        {GHOST_VMA_SHARED, "shared"},
        {GHOST_VMA_GROWSDOWN, "growsdown"},
        {GHOST_VMA_FILE, "file"},
        {GHOST_VMA_HEAP, "heap"},
        {GHOST_VMA_STACK, "stack"},
        {GHOST_VMA_VDSO, "vdso"},
        {GHOST_VMA_VVAR, "vvar"},
        {GHOST_VMA_MAYWRITE, "maywrite"},
        {GHOST_VMA_LOCKED, "locked"},
        {GHOST_VMA_LOCKONFAULT, "lockonfault"},
        {GHOST_VMA_NORESERVE, "noreserve"},
        {GHOST_VMA_DONTDUMP, "dontdump"},
        {GHOST_VMA_WIPEONFORK, "wipeonfork"},
        {GHOST_VMA_DONTFORK, "dontfork"},
        {GHOST_VMA_MERGEABLE, "mergeable"},
        {GHOST_VMA_HUGEPAGE, "hugepage"},
        {GHOST_VMA_NOHUGEPAGE, "nohugepage"},
        {GHOST_VMA_SEQ_READ, "seqread"},
        {GHOST_VMA_RAND_READ, "randread"},
    };
    std::vector<std::string> out;
    for (const auto& [bit, name] : names)
        if (f & bit)
            out.emplace_back(name);
    return out;
}

// " [locked, dontdump]": the attributes of a mapping but may-write.
std::string attr_names(std::uint32_t flags) {
    std::string s;
    for (const auto& n :
         vma_flag_names(flags & GHOST_VMA_ATTRS & ~static_cast<std::uint32_t>(GHOST_VMA_MAYWRITE)))
        s += (s.empty() ? " [" : ", ") + n;
    return s.empty() ? s : s + "]";
}

std::string mapping_name(const ghost::image::Vma& v) {
    const auto f = v.rec.flags;
    if (f & GHOST_VMA_FILE)
        return v.path;
    if (f & GHOST_VMA_VDSO)
        return "[vdso]";
    if (f & GHOST_VMA_VVAR)
        return "[vvar]";
    if (f & GHOST_VMA_HEAP)
        return "[heap]";
    if (f & GHOST_VMA_STACK)
        return "[stack]";
    return "[anon]";
}

std::string access_mode(std::uint32_t flags) {
    switch (flags & O_ACCMODE) {
    case O_RDONLY:
        return "r";
    case O_WRONLY:
        return "w";
    default:
        return "rw";
    }
}

std::string file_kind(std::uint32_t kind) {
    switch (kind) {
    case GHOST_FILE_PATH:
        return "path";
    case GHOST_FILE_INHERIT:
        return "inherit";
    case GHOST_FILE_DUP:
        return "dup";
    default:
        return "unknown";
    }
}

std::string capture_time(std::uint64_t ns) {
    const std::time_t t = static_cast<std::time_t>(ns / 1000000000ULL);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[64];
    std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
    return buf;
}

// Signals with a handler (not SIG_DFL).
std::vector<std::pair<int, std::uint64_t>> handlers(const ghost_signals& s) {
    std::vector<std::pair<int, std::uint64_t>> out;
    for (int i = 0; i < GHOST_NSIG; ++i)
        if (s.action[i].handler)
            out.emplace_back(i + 1, s.action[i].handler);
    return out;
}

std::string sigset_string(std::uint64_t set) {
    if (!set)
        return "none";
    std::string s;
    for (int i = 0; i < 64; ++i)
        if (set & (1ULL << i)) {
            const char* abbrev = i + 1 < NSIG ? sigabbrev_np(i + 1) : nullptr;
            s += fmt::format("{}{}", s.empty() ? "" : " ",
                             abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("{}", i + 1));
        }
    return s;
}

// The descriptor a DUP record shares its open file with: the earlier one
// with its file id, or in version-1 images the one named in pos; -1 else.
int shared_fd(const ghost::image::Image& img, const ghost::image::File& f) {
    if (f.rec.kind != GHOST_FILE_DUP)
        return -1;
    if (!(img.header.features & GHOST_IMAGE_FEAT_FILE_ID))
        return static_cast<int>(f.rec.pos);
    for (const auto& e : img.files)
        if (e.rec.file_id == f.rec.file_id && e.rec.kind != GHOST_FILE_DUP)
            return e.rec.fd;
    return -1;
}

json regs_json(const ghost_regs& r) {
    return {{"rip", r.ip},
            {"rsp", r.sp},
            {"rbp", r.bp},
            {"rax", r.ax},
            {"rbx", r.bx},
            {"rcx", r.cx},
            {"rdx", r.dx},
            {"rsi", r.si},
            {"rdi", r.di},
            {"r8", r.r8},
            {"r9", r.r9},
            {"r10", r.r10},
            {"r11", r.r11},
            {"r12", r.r12},
            {"r13", r.r13},
            {"r14", r.r14},
            {"r15", r.r15},
            {"eflags", r.flags},
            {"orig_rax", r.orig_ax},
            {"fs_base", r.fs_base},
            {"gs_base", r.gs_base},
            {"cs", r.cs},
            {"ss", r.ss}};
}

void print_regs(const ghost::image::Image& img) {
    const auto& r = img.regs;
    fmt::print("registers\n");
    fmt::print("  rip {:016x}  rsp {:016x}  rbp {:016x}  eflags {:08x}\n", r.ip, r.sp, r.bp,
               r.flags);
    fmt::print("  rax {:016x}  rbx {:016x}  rcx {:016x}  rdx {:016x}\n", r.ax, r.bx, r.cx, r.dx);
    fmt::print("  rsi {:016x}  rdi {:016x}  r8  {:016x}  r9  {:016x}\n", r.si, r.di, r.r8, r.r9);
    fmt::print("  r10 {:016x}  r11 {:016x}  r12 {:016x}  r13 {:016x}\n", r.r10, r.r11, r.r12,
               r.r13);
    fmt::print("  r14 {:016x}  r15 {:016x}  orig_rax {:x}\n", r.r14, r.r15, r.orig_ax);
    fmt::print("  fs_base {:016x}  gs_base {:016x}\n", r.fs_base, r.gs_base);
    fmt::print("  xstate {} bytes, features {:#x}\n", img.xstate.size, img.xstate.xfeatures);
}

using StackPages = std::vector<std::pair<std::uint64_t, std::vector<std::byte>>>;

// argv joined by spaces, from the carried stack pages; empty if not there.
std::string command_line(const ghost::image::Image& img, const StackPages& stack) {
    const std::uint64_t lo = img.mm.arg_start, hi = img.mm.arg_end;
    if (hi <= lo || hi - lo > 65536)
        return {};
    std::string out(hi - lo, '\0');
    std::uint64_t found = 0;
    for (const auto& [addr, data] : stack) {
        const std::uint64_t a = std::max(lo, addr), b = std::min(hi, addr + data.size());
        if (a >= b)
            continue;
        std::memcpy(out.data() + (a - lo), data.data() + (a - addr), b - a);
        found += b - a;
    }
    if (found != hi - lo)
        return {};
    while (!out.empty() && out.back() == '\0')
        out.pop_back();
    std::replace(out.begin(), out.end(), '\0', ' ');
    return out;
}

// The first descriptor of the open file a lock is held through.
int lock_fd(const ghost::image::Image& img, const ghost_lock& l) {
    for (const auto& f : img.files)
        if (f.rec.file_id == l.file_id)
            return f.rec.fd;
    return -1;
}

// "no_new_privs session_leader ...": GHOST_ATTRS_* flags, by name.
std::string attrs_list(std::uint32_t flags) {
    static constexpr std::pair<std::uint32_t, std::string_view> names[] = {
        {GHOST_ATTRS_NO_NEW_PRIVS, "no_new_privs"},
        {GHOST_ATTRS_THP_DISABLE, "thp_disable"},
        {GHOST_ATTRS_CHILD_SUBREAPER, "child_subreaper"},
        {GHOST_ATTRS_NOT_DUMPABLE, "not_dumpable"},
        {GHOST_ATTRS_SESSION_LEADER, "session_leader"},
        {GHOST_ATTRS_GROUP_LEADER, "group_leader"},
    };
    std::string s;
    for (const auto& [bit, n] : names)
        if (flags & bit)
            s += fmt::format("{}{}", s.empty() ? "" : " ", n);
    return s;
}

json to_json(const ghost::image::Image& img, const std::string& cmdline, bool compressed,
             bool regs) {
    json vmas = json::array();
    for (const auto& v : img.vmas) {
        json runs = json::array();
        for (const auto& r : v.runs)
            runs.push_back(
                {{"addr", r.addr}, {"nr_pages", r.nr_pages}, {"data_offset", r.data_offset}});
        vmas.push_back({{"start", v.rec.start},
                        {"end", v.rec.end},
                        {"prot", prot_string(v.rec)},
                        {"flags", vma_flag_names(v.rec.flags)},
                        {"name", mapping_name(v)},
                        {"path", v.path},
                        {"pgoff", v.rec.pgoff},
                        {"pages", v.rec.nr_pages},
                        {"runs", std::move(runs)}});
    }
    json files = json::array();
    for (const auto& f : img.files)
        files.push_back({{"fd", f.rec.fd},
                         {"kind", file_kind(f.rec.kind)},
                         {"path", f.path},
                         {"access", access_mode(f.rec.flags)},
                         {"flags", f.rec.flags},
                         {"cloexec", (f.rec.fd_flags & FD_CLOEXEC) != 0},
                         {"pos", f.rec.pos},
                         {"file_id", f.rec.file_id},
                         {"shares_fd", shared_fd(img, f)},
                         {"mode", f.rec.mode}});
    json locks = json::array();
    for (const auto& l : img.locks)
        locks.push_back({{"file_id", l.file_id},
                         {"fd", lock_fd(img, l)},
                         {"kind", ghost_lock_kind_name(l.kind)},
                         {"type", l.type == F_WRLCK ? "write" : "read"},
                         {"start", l.start},
                         {"len", l.len}});
    json sig_handlers = json::array();
    for (const auto& [sig, h] : handlers(img.signals))
        sig_handlers.push_back({{"signal", sig},
                                {"handler", h},
                                {"flags", img.signals.action[sig - 1].flags},
                                {"mask", img.signals.action[sig - 1].mask}});
    const bool xxh64 = img.header.features & GHOST_IMAGE_FEAT_XXH64;
    json j = {{"version", img.header.version},
              {"features", img.header.features},
              {"required_features", img.header.required_features},
              {"vdso", {{"size", img.mm.vdso_size}, {"crc32c", img.mm.vdso_crc32c}}},
              {"compressed", compressed},
              {"bytes", img.bytes},
              {"pid", img.header.pid},
              {"time_ns", img.header.time_ns},
              {"comm", std::string(img.task.comm, strnlen(img.task.comm, sizeof(img.task.comm)))},
              {"cmdline", cmdline},
              {"cwd", img.cwd},
              {"umask", img.umask},
              {"pages", img.pages()},
              {"inherited_pages", img.inherited_pages()},
              {"vmas", std::move(vmas)},
              {"files", std::move(files)},
              {"locks", std::move(locks)},
              {"signals",
               {{"blocked", img.signals.blocked},
                {"pending", img.signals.pending},
                {"altstack",
                 {{"sp", img.signals.altstack_sp},
                  {"size", img.signals.altstack_size},
                  {"flags", img.signals.altstack_flags}}},
                {"handlers", std::move(sig_handlers)}}},
              {"checksum", xxh64 ? "xxh64" : "crc32c"},
              {"crc32c", img.crc32c},
              {"xxh64", img.xxh64}};
    if (img.creds) {
        const auto& c = *img.creds;
        j["creds"] = {{"uid", {c.uid, c.euid, c.suid, c.fsuid}},
                      {"gid", {c.gid, c.egid, c.sgid, c.fsgid}},
                      {"groups", img.groups},
                      {"cap_inheritable", c.cap_inheritable},
                      {"cap_permitted", c.cap_permitted},
                      {"cap_effective", c.cap_effective},
                      {"cap_bset", c.cap_bset},
                      {"cap_ambient", c.cap_ambient},
                      {"securebits", c.securebits},
                      {"loginuid", c.loginuid}};
    }
    if (img.attrs) {
        const auto& a = *img.attrs;
        j["attrs"] = {{"flags", attrs_list(a.flags)},
                      {"oom_score_adj", a.oom_score_adj},
                      {"nice", a.nice},
                      {"timerslack_ns", a.timerslack_ns},
                      {"membarrier", a.membarrier}};
    }
    if (regs) {
        j["regs"] = regs_json(img.regs);
        j["xstate"] = {{"size", img.xstate.size}, {"xfeatures", img.xstate.xfeatures}};
    }
    return j;
}

// " (file ids, vDSO id)": the image's GHOST_IMAGE_FEAT_* bits, by name.
std::string feature_list(std::uint64_t features) {
    std::string s;
    const auto add = [&](std::string_view n) {
        s += fmt::format("{}{}", s.empty() ? "" : ", ", n);
    };
    if (features & GHOST_IMAGE_FEAT_FILE_ID)
        add("file ids");
    if (features & GHOST_IMAGE_FEAT_VDSO_ID)
        add("vDSO id");
    if (features & GHOST_IMAGE_FEAT_CREDS)
        add("credentials");
    if (features & GHOST_IMAGE_FEAT_VMA_ATTRS)
        add("mapping attributes");
    if (features & GHOST_IMAGE_FEAT_LOCKS)
        add("locks");
    if (features & GHOST_IMAGE_FEAT_ATTRS)
        add("attributes");
    if (features & GHOST_IMAGE_FEAT_PARENT)
        add("incremental");
    if (features & GHOST_IMAGE_FEAT_XXH64)
        add("XXH64 checksum");
    for (int b = 0; b < 64; b++)
        if ((features >> b & 1) && !((1ULL << b) & GHOST_IMAGE_FEATURES))
            add(fmt::format("feature {}", b));
    return s.empty() ? s : " (" + s + ")";
}

void print_summary(const std::string& name, const ghost::image::Image& img,
                   const std::string& cmdline, bool compressed, std::uint64_t file_bytes) {
    const std::string comm(img.task.comm, strnlen(img.task.comm, sizeof(img.task.comm)));
    fmt::print("image      {}: ghost image v{}{}, {}{}\n", name, img.header.version,
               feature_list(img.header.features), human_bytes(img.bytes),
               compressed ? fmt::format(" (zstd, {} on disk)", human_bytes(file_bytes)) : "");
    fmt::print("captured   {} from pid {} (x86-64)\n", capture_time(img.header.time_ns),
               img.header.pid);
    fmt::print("checksum   {} (END, of the bytes before it: verified)\n",
               img.header.features & GHOST_IMAGE_FEAT_XXH64
                   ? fmt::format("xxh64 {:#018x}", img.xxh64)
                   : fmt::format("crc32c {:#010x}", img.crc32c));
    print_parent(name, img);
    fmt::print("process    {}  cwd {}  umask {:04o}\n", comm, img.cwd, img.umask);
    if (!cmdline.empty())
        fmt::print("command    {}\n", cmdline);
    if (img.creds) {
        const auto& c = *img.creds;
        fmt::print("creds      uid {}/{}/{}/{}  gid {}/{}/{}/{}  groups {}  loginuid {}\n", c.uid,
                   c.euid, c.suid, c.fsuid, c.gid, c.egid, c.sgid, c.fsgid,
                   img.groups.empty() ? "-" : fmt::format("{}", fmt::join(img.groups, ",")),
                   static_cast<std::int32_t>(c.loginuid));
        fmt::print("  caps     permitted {:#x} effective {:#x} inheritable {:#x} bounding {:#x} "
                   "ambient {:#x} securebits {:#x}\n",
                   c.cap_permitted, c.cap_effective, c.cap_inheritable, c.cap_bset, c.cap_ambient,
                   c.securebits);
    } else {
        fmt::print("creds      none recorded: restores as the restarting user\n");
    }
    if (img.attrs) {
        const auto& a = *img.attrs;
        const std::string f = attrs_list(a.flags);
        fmt::print(
            "attributes nice {}  oom_score_adj {}  timer slack {} ns  membarrier {:#x}{}{}\n",
            a.nice, a.oom_score_adj, a.timerslack_ns, a.membarrier, f.empty() ? "" : "  ", f);
    }

    std::uint64_t mapped = 0;
    for (const auto& v : img.vmas)
        mapped += v.rec.end - v.rec.start;
    fmt::print("memory     {} mappings, {} mapped, {} carried ({} pages){}\n", img.vmas.size(),
               human_bytes(mapped), human_bytes(img.pages() * img.header.page_size), img.pages(),
               img.parent ? fmt::format(", {} pages inherited", img.inherited_pages()) : "");
    fmt::print("  {:<16} {:<16} {:<4} {:>10} {:>10}  {}\n", "START", "END", "PROT", "SIZE",
               "CARRIED", "MAPPING");
    for (const auto& v : img.vmas)
        fmt::print("  {:016x} {:016x} {:<4} {:>10} {:>10}  {}\n", v.rec.start, v.rec.end,
                   prot_string(v.rec), human_bytes(v.rec.end - v.rec.start),
                   human_bytes(v.rec.nr_pages * img.header.page_size),
                   mapping_name(v) + attr_names(v.rec.flags));

    fmt::print("files      {} descriptors\n", img.files.size());
    if (!img.files.empty()) {
        fmt::print("  {:>4} {:<8} {:<3} {:>10}  {}\n", "FD", "KIND", "ACC", "POS", "PATH");
        for (const auto& f : img.files)
            fmt::print("  {:>4} {:<8} {:<3} {:>10}  {}{}\n", f.rec.fd, file_kind(f.rec.kind),
                       access_mode(f.rec.flags),
                       f.rec.kind == GHOST_FILE_DUP ? fmt::format("fd {}", shared_fd(img, f))
                                                    : fmt::format("{}", f.rec.pos),
                       f.path, (f.rec.fd_flags & FD_CLOEXEC) ? " (cloexec)" : "");
    }
    if (!img.locks.empty())
        fmt::print("locks      {}\n", img.locks.size());
    for (const auto& l : img.locks)
        fmt::print("  fd {} {} {} {}\n", lock_fd(img, l), ghost_lock_kind_name(l.kind),
                   l.type == F_WRLCK ? "write" : "read",
                   l.kind == GHOST_LOCK_FLOCK ? std::string("whole file")
                   : l.len ? fmt::format("bytes {}-{}", l.start, l.start + l.len - 1)
                           : fmt::format("bytes {}-EOF", l.start));
    fmt::print("signals    blocked: {}; pending: {}\n", sigset_string(img.signals.blocked),
               sigset_string(img.signals.pending));
    for (const auto& [sig, h] : handlers(img.signals))
        fmt::print("  {} -> {}\n", sigset_string(1ULL << (sig - 1)),
                   h == 1 ? std::string("ignored") : fmt::format("handler {:#x}", h));
    if (img.signals.altstack_size)
        fmt::print("  alternate stack {:#x}, {} bytes\n", img.signals.altstack_sp,
                   img.signals.altstack_size);
}

} // namespace

int cmd_inspect(const InspectArgs& a) {
    ghost::UniqueFd owned;
    int fd = STDIN_FILENO;
    if (a.input != "-") {
        owned.reset(::open(a.input.c_str(), O_RDONLY | O_CLOEXEC));
        if (!owned)
            return fail(fmt::format("cannot open {}: {}", a.input,
                                    std::error_code(errno, std::system_category()).message()));
        fd = owned.get();
    }
    struct stat st {};
    ::fstat(fd, &st);
    auto src = ghost::image_source(fd);
    if (!src)
        return fail(src.error());
    std::array<std::byte, 4> head{};
    const bool compressed = S_ISREG(st.st_mode) && ::pread(fd, head.data(), head.size(), 0) == 4 &&
                            ghost::is_zstd(head);

    // The command line lives in the process's memory, at the top of its
    // stack: keep the stack's carried pages (bounded) as they stream by.
    std::vector<std::pair<std::uint64_t, std::vector<std::byte>>> stack;
    std::size_t kept = 0;
    ghost::image::ReadOptions ro;
    ro.on_pages = [&](const ghost::image::Vma& v, const ghost::image::PageRun& run,
                      std::span<const std::byte> data) -> ghost::Result<void> {
        if ((v.rec.flags & GHOST_VMA_STACK) && kept + data.size() <= (8u << 20)) {
            stack.emplace_back(run.addr, std::vector<std::byte>(data.begin(), data.end()));
            kept += data.size();
        }
        return {};
    };
    auto img = ghost::image::read(**src, ro);
    if (!img)
        return fail(fmt::format("{}: {}", a.input, img.error().what()));
    const std::string cmdline = command_line(*img, stack);
    if (a.json) {
        auto j = to_json(*img, cmdline, compressed, a.regs);
        j["parent"] = parent_json(a.input, *img);
        fmt::print("{}\n", j.dump(2));
        return exit_ok;
    }
    print_summary(a.input, *img, cmdline, compressed, static_cast<std::uint64_t>(st.st_size));
    if (a.regs)
        print_regs(*img);
    return exit_ok;
}

} // namespace ghostctl
