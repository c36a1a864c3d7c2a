// SPDX-License-Identifier: GPL-2.0
// Kernel mutated-image test, built with libghost's image writer. Runs in the
// test VM (tests/vm/guest/ghost-vm-tests runs every bin/ghost_*_test) and
// prints TAP.
//
// A real workload (ghost-mutate-workload serve) is exported by ghost.ko and
// read with ghost::image::read. Then a few hundred *structured* mutations of
// that image (fields, counts, paths, section order, duplicated or missing
// sections, runs outside their mapping, ...) are encoded with encode() or
// Writer, so each one is well framed with a valid checksum and reaches the
// check it aims at. Each is imported by a fresh child (ghost_restore_self),
// which either reports a rejection and lives on, or becomes the workload;
// the restored workload is asked, through pipes it inherits, to check its
// state. It may answer as before, answer differently, crash or be killed:
// all acceptable for a mutated image, as long as the kernel stays sound
// (the VM harness fails the run on any kernel warning or oops). Nothing may
// hang.
//
// Each image is also judged by the user-space reader. The reader applies
// ghost.ko's checks except those that depend on the machine, so for every
// image the two must agree: the kernel may refuse what the reader accepts
// only for a machine-dependent reason (a path that does not open, an FPU
// feature, the vDSO's place), and must never restore what the reader
// refuses. Where the format and one kernel differ on purpose (5-level page
// tables, Linux 6.1's smaller aux vector), the case is marked as machine
// dependent. A malformed image must be refused with EBADMSG (an ENOMEM
// means the kernel sized an allocation by an unchecked field). Known kernel
// issues are listed below (kKnown) and reported as diagnostics; anything
// else that differs fails the class's TAP line. Classes that trigger known
// kernel bugs which would break the run (a WARNING, a process SIGKILL cannot
// end) are only read in user space unless GHOST_MUTATE_KNOWN_BUGS=1 (none at
// the moment: the three this test found are fixed in kmod/).
//
// GHOST_MUTATE_SEED, GHOST_MUTATE_COUNT (default 300), GHOST_MUTATE_VERBOSE=1
// (one line per case), GHOST_MUTATE_CLASS=NAME (that class only),
// GHOST_MUTATE_KNOWN_BUGS=1 (also import what triggers known kernel bugs).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <linux/ghost.h>

#include "ghost/c/export_target.h"
#include "ghost/c/restore_self.h"
#include "ghost/fd.hpp"
#include "ghost/image.hpp"

namespace {

namespace img = ghost::image;
using Bytes = std::vector<std::byte>;
using ghost::UniqueFd;
using u64 = std::uint64_t;
using u32 = std::uint32_t;

constexpr u64 kPage = 4096;
constexpr u64 kUserEnd = (1ULL << 47) - kPage; // the reader's end of user space
// Descriptors of the importing child: the workload's request and reply pipes
// where the workload had them, and two of the child's own, out of the way of
// every number a mutation picks.
constexpr int kReqFd = 3, kRepFd = 4, kGhostFd = 998, kStatusFd = 999;
constexpr int kImportTimeoutMs = 20000; // a hang is a failure, not slowness
// A mutated image may restore a process that never answers: it gets this
// long. The unmutated one, which must answer, gets more (a loaded machine).
constexpr int kAnswerTimeoutMs = 3000, kBaseAnswerTimeoutMs = 15000;

u64 g_kernel_user_end = kUserEnd; // TASK_SIZE_MAX of the running kernel

double now() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

// ---- randomness ----------------------------------------------------------------

struct Rng {
    u64 s;
    u64 next() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s * 0x2545F4914F6CDD1DULL;
    }
    u64 below(u64 n) { return n ? next() % n : 0; }
    bool chance(int percent) { return below(100) < static_cast<u64>(percent); }
    template <class T> T pick(std::initializer_list<T> v) { return v.begin()[below(v.size())]; }
};

// ---- small system helpers --------------------------------------------------------

// Moves descriptors to fixed numbers (@pairs: from, to) and closes all others.
// Runs between fork and exec or import: system calls only.
void arrange(std::initializer_list<std::pair<int, int>> pairs) {
    int tmp[16], n = 0;
    for (const auto& p : pairs)
        tmp[n++] = fcntl(p.first, F_DUPFD, 900); // below RLIMIT_NOFILE, above the rest
    n = 0;
    for (const auto& p : pairs)
        dup2(tmp[n++], p.second);
    // Close all but the targets: they are few, so close the gaps between.
    int targets[16], k = 0;
    for (const auto& p : pairs)
        targets[k++] = p.second;
    std::sort(targets, targets + k);
    unsigned from = 0;
    for (int i = 0; i < k; i++) {
        if (static_cast<unsigned>(targets[i]) > from)
            close_range(from, targets[i] - 1, 0);
        from = targets[i] + 1;
    }
    close_range(from, ~0u, 0);
}

// Waits for @fd to be readable; false on timeout.
bool wait_readable(int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    for (;;) {
        const int r = poll(&p, 1, ms);
        if (r >= 0)
            return r == 1;
        if (errno != EINTR)
            return false;
    }
}

// A line from @fd (up to '\n' or EOF), or nullopt-like "" with @timeout set.
std::string read_line(int fd, int ms, bool& timeout, bool& eof) {
    std::string s;
    timeout = eof = false;
    const double end = now() + ms / 1e3;
    while (s.size() < 128) {
        const int left = static_cast<int>((end - now()) * 1e3);
        if (left <= 0 || !wait_readable(fd, left)) {
            timeout = true;
            return s;
        }
        char c;
        const auto n = ::read(fd, &c, 1);
        if (n <= 0) {
            eof = true;
            return s;
        }
        s += c;
        if (c == '\n')
            return s;
    }
    return s;
}

std::string slurp(const std::string& path) {
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    std::string s;
    char buf[4096];
    ssize_t n;
    while (fd && (n = ::read(fd.get(), buf, sizeof(buf))) > 0)
        s.append(buf, n);
    return s;
}

bool wait_for(pid_t pid, int ms, int* status) {
    const double end = now() + ms / 1e3;
    do {
        if (waitpid(pid, status, WNOHANG) == pid)
            return true;
        usleep(2000);
    } while (now() < end);
    return false;
}

// A process SIGKILL does not end (stuck in the kernel): its stack, for the log.
std::string g_unkillable;

// Reaps @pid within @ms, else kills it and reaps it; *killed says whether we
// did. Never blocks for good: a process that survives SIGKILL for 10 s is
// left behind and reported (g_unkillable).
int reap(pid_t pid, int ms, bool* killed = nullptr) {
    int status = 0;
    if (killed)
        *killed = false;
    if (wait_for(pid, ms, &status))
        return status;
    if (killed)
        *killed = true;
    kill(pid, SIGKILL);
    if (!wait_for(pid, 10000, &status)) {
        const auto dir = "/proc/" + std::to_string(pid);
        g_unkillable = "pid " + std::to_string(pid) +
                       " survives SIGKILL; state: " + slurp(dir + "/stat") + "kernel stack:\n" +
                       slurp(dir + "/stack");
        status = 0;
    }
    return status;
}

// ---- /dev/ghost ---------------------------------------------------------------------

UniqueFd ghost_new() {
    UniqueFd dev(open("/dev/" GHOST_DEVICE_NAME, O_RDWR | O_CLOEXEC));
    if (!dev)
        return {};
    ghost_create c{};
    c.size = sizeof(c);
    c.flags = GHOST_CREATE_CLOEXEC;
    return UniqueFd(ioctl(dev.get(), GHOST_IOC_CREATE, &c));
}

bool plug(int g, u32 type, int fd) {
    struct ghost_plug p {};
    p.size = sizeof(p);
    p.type = type;
    p.fd = fd;
    return ioctl(g, GHOST_IOC_PLUG, &p) == 0;
}

bool write_all(int fd, std::span<const std::byte> b) {
    while (!b.empty()) {
        const auto n = ::write(fd, b.data(), b.size());
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        b = b.subspan(static_cast<std::size_t>(n));
    }
    return true;
}

// A ghost holding @image: in its memory buffer, or behind a file.
UniqueFd ghost_holding(const Bytes& image, bool via_file) {
    auto g = ghost_new();
    if (!g)
        return {};
    if (!via_file) {
        if (!plug(g.get(), GHOST_RES_MEMORY, -1) || !write_all(g.get(), image))
            return {};
        return g;
    }
    char path[] = "/tmp/ghost-mutate-XXXXXX";
    UniqueFd f(mkstemp(path));
    if (!f)
        return {};
    unlink(path);
    if (!write_all(f.get(), image) || lseek(f.get(), 0, SEEK_SET) != 0 ||
        !plug(g.get(), GHOST_RES_FILE, f.get()))
        return {};
    return g;
}

// ---- the workload -------------------------------------------------------------------

std::string workload_path() {
    char self[PATH_MAX];
    const auto n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    std::string dir = n > 0 ? std::string(self, n) : std::string();
    dir = dir.substr(0, dir.rfind('/') + 1);
    return dir + "ghost-mutate-workload";
}

struct Pipes {
    UniqueFd req_r, req_w, rep_r, rep_w;
    bool make() {
        int a[2], b[2];
        if (pipe2(a, O_CLOEXEC) || pipe2(b, O_CLOEXEC))
            return false;
        req_r.reset(a[0]);
        req_w.reset(a[1]);
        rep_r.reset(b[0]);
        rep_w.reset(b[1]);
        return true;
    }
};

// Starts the workload, waits for "R", asks once; *answer gets its line.
pid_t start_workload(Pipes& p, std::string* answer) {
    const auto path = workload_path();
    UniqueFd null(open("/dev/null", O_RDWR | O_CLOEXEC));
    const pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        arrange({{null.get(), 0},
                 {null.get(), 1},
                 {null.get(), 2},
                 {p.req_r.get(), kReqFd},
                 {p.rep_w.get(), kRepFd}});
        execl(path.c_str(), "ghost-mutate-workload", "serve", static_cast<char*>(nullptr));
        _exit(127);
    }
    p.req_r.reset();
    p.rep_w.reset();
    char c = 0;
    if (pid < 0 || !wait_readable(p.rep_r.get(), 10000) || ::read(p.rep_r.get(), &c, 1) != 1 ||
        c != 'R' || ::write(p.req_w.get(), "p", 1) != 1)
        return -1;
    bool timeout, eof;
    *answer = read_line(p.rep_r.get(), 10000, timeout, eof);
    return pid;
}

// ---- images -----------------------------------------------------------------------

using PageStore = std::map<u64, Bytes>; // page address -> contents

// Encodes @m with page data from @ps (zeros where it has none).
Bytes encode_with(const img::Image& m, const PageStore& ps) {
    Bytes buf;
    return img::encode(m, [&](const img::Vma&, const img::PageRun& r) {
        buf.assign(r.nr_pages * kPage, std::byte{0});
        for (u64 i = 0; i < r.nr_pages; i++)
            if (auto it = ps.find(r.addr + i * kPage); it != ps.end())
                std::copy(it->second.begin(), it->second.end(), buf.begin() + i * kPage);
        return std::span<const std::byte>(buf);
    });
}

// An image as a list of sections, to reorder, repeat or drop. @flags is the
// 32-bit word of version 1, whose upper half is now record_size: bits there
// change the record size that is written.
struct Piece {
    u32 type = 0, flags = 0;
    Bytes payload; // or, for PAGES, the data at @addr
    u64 addr = 0;
    u32 rec = 0; // record bytes at the start of the payload; 0: this reader's
};

template <class T> Bytes rec_bytes(const T& rec, std::string_view tail = {}) {
    Bytes b(sizeof(T) + tail.size());
    std::memcpy(b.data(), &rec, sizeof(T));
    std::memcpy(b.data() + sizeof(T), tail.data(), tail.size());
    return b;
}

std::vector<Piece> pieces_of(const img::Image& m, const PageStore& ps) {
    std::vector<Piece> out;
    out.push_back({GHOST_SEC_TASK, 0, rec_bytes(m.task)});
    if (m.creds) {
        Bytes c = rec_bytes(*m.creds);
        const auto g = std::as_bytes(std::span(m.groups));
        c.insert(c.end(), g.begin(), g.end());
        out.push_back({GHOST_SEC_CREDS, 0, c});
    }
    if (m.attrs)
        out.push_back({GHOST_SEC_ATTRS, 0, rec_bytes(*m.attrs)});
    out.push_back({GHOST_SEC_REGS, 0, rec_bytes(m.regs)});
    Bytes x = rec_bytes(m.xstate);
    x.insert(x.end(), m.xsave.begin(), m.xsave.end());
    out.push_back({GHOST_SEC_XSTATE, 0, x});
    out.push_back({GHOST_SEC_SIGNALS, 0, rec_bytes(m.signals)});
    const ghost_fs fs{m.umask, static_cast<u32>(m.cwd.size())};
    out.push_back({GHOST_SEC_FS, 0, rec_bytes(fs, m.cwd)});
    out.push_back({GHOST_SEC_RLIMITS, 0, rec_bytes(m.rlimits)});
    out.push_back({GHOST_SEC_MM, 0, rec_bytes(m.mm)});
    for (const auto& v : m.vmas) {
        out.push_back({GHOST_SEC_VMA, 0, rec_bytes(v.rec, v.path)});
        for (const auto& r : v.runs) {
            Piece p{GHOST_SEC_PAGES, 0, Bytes(r.nr_pages * kPage), r.addr};
            for (u64 i = 0; i < r.nr_pages; i++)
                if (auto it = ps.find(r.addr + i * kPage); it != ps.end())
                    std::copy(it->second.begin(), it->second.end(), p.payload.begin() + i * kPage);
            out.push_back(std::move(p));
        }
    }
    for (const auto& f : m.files)
        out.push_back({GHOST_SEC_FILE, 0, rec_bytes(f.rec, f.path)});
    return out;
}

// The image as format version 1 has it: no feature bits, so no vDSO record
// and a DUP naming the shared descriptor in pos instead of a file id.
img::Image as_version1(img::Image m) {
    m.header.version = 1;
    m.header.features = m.header.required_features = 0;
    m.mm.vdso_size = m.mm.vdso_crc32c = 0;
    m.creds.reset();
    m.groups.clear();
    m.attrs.reset();
    for (auto& f : m.files)
        if (f.rec.kind == GHOST_FILE_DUP)
            for (const auto& e : m.files)
                if (e.rec.file_id == f.rec.file_id && e.rec.kind != GHOST_FILE_DUP)
                    f.rec.pos = static_cast<u64>(e.rec.fd);
    for (auto& f : m.files)
        f.rec.file_id = 0;
    for (auto& v : m.vmas) // no mapping attributes either
        v.rec.flags &= ~static_cast<u32>(GHOST_VMA_ATTRS);
    return m;
}

Bytes build(const ghost_image_header& h, const std::vector<Piece>& ps, bool end = true) {
    img::Writer w;
    w.header(h);
    for (const auto& p : ps) {
        const auto rec = p.rec ? p.rec : h.version == 1 ? 0 : img::record_size(p.type, h.version);
        if (p.type == GHOST_SEC_PAGES && !p.flags)
            w.pages(p.addr, p.payload);
        else
            w.section(p.type, p.payload, static_cast<std::uint16_t>(p.flags),
                      static_cast<std::uint16_t>(rec ^ (p.flags >> 16)));
    }
    if (end)
        w.end();
    return std::move(w.bytes());
}

// ---- mutations --------------------------------------------------------------------

// One mutated image in the making.
struct Gen {
    Rng& rng;
    img::Image m; // starts as the base image
    PageStore ps; // starts as the base image's pages
    std::string what;
    bool md = false; // the kernel's verdict may depend on the machine
    Bytes out;       // set by the class; else m and ps are encoded

    void say(std::string s) { what += (what.empty() ? "" : ", ") + s; }
    void machine(std::string why) {
        if (!md)
            say("[machine-dependent: " + why + "]");
        md = true;
    }
    // A value for a user address: user, kernel, non-canonical, the edges.
    u64 addr(std::string_view field) {
        const u64 v =
            rng.pick<u64>({0, 0x1000, (0x400000 + rng.below(1 << 20)) & ~7ULL, kUserEnd - kPage,
                           kUserEnd - 1, kUserEnd, 1ULL << 47, (1ULL << 56) - 2 * kPage, 1ULL << 56,
                           0xffff800000000000ULL, 0xffffffffff600000ULL, ~0ULL, rng.next()});
        char s[64];
        snprintf(s, sizeof(s), "%.*s=%#llx", static_cast<int>(field.size()), field.data(),
                 static_cast<unsigned long long>(v));
        say(s);
        return v;
    }
    // After addr(): values the running kernel takes as user addresses and the
    // reader does not (5-level page tables).
    void note_addr(u64 v, bool end_inclusive = false) {
        const bool reader = end_inclusive ? v <= kUserEnd : v < kUserEnd;
        const bool kernel = end_inclusive ? v <= g_kernel_user_end : v < g_kernel_user_end;
        if (reader != kernel && !md)
            machine("a user address only with 5-level page tables");
    }
    // AT_VECTOR_SIZE: Linux 6.1 keeps 48 words on x86-64 with IA32
    // emulation (Debian), 46 without; the format allows GHOST_AUXV_WORDS.
    void note_auxv(u32 words) {
        if (words > 46 && words <= GHOST_AUXV_WORDS)
            machine("Linux 6.1 keeps 46 or 48 aux vector words");
    }
    // The notes above for every field of a record changed byte by byte.
    void note_record(u32 type, const Bytes& payload) {
        const auto rec = [&]<class T>(T& r) {
            if (payload.size() < sizeof(T))
                return false;
            std::memcpy(&r, payload.data(), sizeof(T));
            return true;
        };
        ghost_task t;
        ghost_regs r;
        ghost_signals sg;
        ghost_mm mm;
        ghost_vma v;
        if (type == GHOST_SEC_TASK && rec(t))
            for (u64 a : {t.rseq, t.clear_child_tid, t.robust_list})
                note_addr(a);
        if (type == GHOST_SEC_REGS && rec(r))
            for (u64 a : {r.ip, r.fs_base, r.gs_base})
                note_addr(a);
        if (type == GHOST_SEC_SIGNALS && rec(sg)) {
            note_addr(sg.altstack_sp);
            for (const auto& a : sg.action)
                note_addr(a.restorer);
        }
        if (type == GHOST_SEC_MM && rec(mm)) {
            for (u64 a : {mm.brk, mm.arg_end, mm.env_end, mm.start_stack, mm.end_code, mm.end_data})
                note_addr(a);
            note_auxv(mm.auxv_words);
        }
        if (type == GHOST_SEC_VMA && rec(v))
            note_addr(v.end, true);
        // Who may be assumed is the importer's business (common/ghost_creds.h).
        if (type == GHOST_SEC_CREDS)
            machine("the credentials the importer may assume");
    }
    img::Vma& any_vma() { return m.vmas[rng.below(m.vmas.size())]; }
    img::Vma* vma_with_runs() {
        std::vector<img::Vma*> v;
        for (auto& x : m.vmas)
            if (!x.runs.empty())
                v.push_back(&x);
        return v.empty() ? nullptr : v[rng.below(v.size())];
    }
    img::Vma* file_vma() {
        std::vector<img::Vma*> v;
        for (auto& x : m.vmas)
            if (x.rec.flags & GHOST_VMA_FILE)
                v.push_back(&x);
        return v.empty() ? nullptr : v[rng.below(v.size())];
    }
    std::string path_value(bool directory_ok) {
        // Valid and invalid paths; the real files are those of the VM.
        const std::string long_name = "/" + std::string(4094, 'a');
        switch (rng.below(directory_ok ? 9 : 8)) {
        case 0:
            return "";
        case 1:
            return "tmp/relative";
        case 2:
            return std::string("/tm\0p", 5);
        case 3:
            return long_name; // 4095 bytes: in the format, too long to open
        case 4:
            return long_name + "b"; // 4096 bytes: out of the format
        case 5:
            return "/nonexistent/ghost-mutate";
        case 6:
            return "/dev/null";
        case 7:
            return workload_path();
        default:
            return "/";
        }
    }
};

struct Class {
    const char* name;
    // Makes one mutation; false when the image has nothing it applies to.
    std::function<bool(Gen&)> make;
    // A known kernel bug these images trigger that would break the run (a
    // WARNING the VM harness sees, a process that cannot be killed): they are
    // then only read in user space, unless GHOST_MUTATE_KNOWN_BUGS=1.
    const char* kernel_bug = nullptr;
    // What the reader must say of them then.
    bool reader_refuses = true;
};

#define SAY(...)                                                                                   \
    do {                                                                                           \
        char buf_[200];                                                                            \
        snprintf(buf_, sizeof(buf_), __VA_ARGS__);                                                 \
        g.say(buf_);                                                                               \
    } while (0)

using ull = unsigned long long;

const std::vector<Class>& classes() {
    static const std::vector<Class> c = {
        {"header",
         [](Gen& g) {
             auto& h = g.m.header;
             switch (g.rng.below(9)) {
             case 7:
                 h.features ^= 1ULL << g.rng.pick<u32>({0, 1, 2, 63});
                 SAY("features %#llx", (ull)h.features);
                 break;
             case 8:
                 h.required_features ^= 1ULL << g.rng.pick<u32>({0, 1, 2, 63});
                 SAY("required_features %#llx", (ull)h.required_features);
                 break;
             case 0:
                 h.magic ^= 1ULL << g.rng.below(64);
                 SAY("magic %#llx", (ull)h.magic);
                 break;
             case 1:
                 h.version = g.rng.pick<u32>({0, 1, 3, 0xffffffff});
                 SAY("version %u", h.version);
                 break;
             case 2:
                 h.header_size = g.rng.pick<u32>({0, 56, 72, 4096});
                 SAY("header_size %u", h.header_size);
                 break;
             case 3:
                 h.arch = g.rng.pick<u32>({0, 3, 40, 183});
                 SAY("arch %u", h.arch);
                 break;
             case 4:
                 h.page_size = g.rng.pick<u32>({0, 2048, 8192, 65536});
                 SAY("page_size %u", h.page_size);
                 break;
             case 5:
                 h.resv[0] = g.rng.next() | 1;
                 g.say("resv non-zero");
                 break;
             default:
                 h.time_ns = g.rng.next();
                 h.pid = static_cast<int>(g.rng.next());
                 g.say("time and pid (informational)");
             }
             return true;
         }},
        {"task-addresses",
         [](Gen& g) {
             auto& t = g.m.task;
             __u64* f[] = {&t.rseq, &t.clear_child_tid, &t.robust_list};
             const char* n[] = {"rseq", "clear_child_tid", "robust_list"};
             const auto i = g.rng.below(3);
             *f[i] = g.addr(n[i]);
             g.note_addr(*f[i]);
             return true;
         }},
        {"task-lengths",
         [](Gen& g) {
             auto& t = g.m.task;
             if (g.rng.chance(50)) {
                 t.rseq_len = g.rng.pick<u32>({0, 20, 31, 32, 33, 64});
                 SAY("rseq_len %u (rseq %#llx)", t.rseq_len, (ull)t.rseq);
             } else {
                 t.robust_list_len = g.rng.pick<u64>({0, 16, 24, 32, ~0ULL});
                 SAY("robust_list_len %llu (list %#llx)", (ull)t.robust_list_len,
                     (ull)t.robust_list);
             }
             return true;
         }},
        {"task-other",
         [](Gen& g) {
             auto& t = g.m.task;
             switch (g.rng.below(4)) {
             case 0:
                 for (auto& c : t.comm)
                     c = static_cast<char>(g.rng.next());
                 g.say("comm random bytes, not NUL-terminated");
                 break;
             case 1:
                 t.personality = g.rng.pick<u32>({0x0040000, 0x0400000, 0x8000000, 0xffffffff});
                 SAY("personality %#x", t.personality);
                 break;
             case 2:
                 t.rseq_sig = static_cast<u32>(g.rng.next());
                 SAY("rseq_sig %#x", t.rseq_sig);
                 break;
             default:
                 if (g.rng.chance(50))
                     t.__pad = 1;
                 else
                     t.resv[g.rng.below(2)] = 1;
                 g.say("reserved field non-zero");
             }
             return true;
         }},
        {"regs-selectors",
         [](Gen& g) {
             auto& r = g.m.regs;
             __u64* f[] = {&r.cs, &r.ss, &r.fs, &r.gs, &r.ds, &r.es};
             const char* n[] = {"cs", "ss", "fs", "gs", "ds", "es"};
             const auto i = g.rng.below(6);
             *f[i] = g.rng.pick<u64>({0, 0x10, 0x23, 0x2b, 0x33, 0x3, g.rng.next()});
             SAY("%s %#llx", n[i], (ull)*f[i]);
             return true;
         }},
        {"regs-addresses",
         [](Gen& g) {
             auto& r = g.m.regs;
             __u64* f[] = {&r.ip, &r.fs_base, &r.gs_base};
             const char* n[] = {"ip", "fs_base", "gs_base"};
             const auto i = g.rng.below(3);
             *f[i] = g.addr(n[i]);
             g.note_addr(*f[i]);
             return true;
         }},
        {"regs-values",
         [](Gen& g) {
             auto& r = g.m.regs;
             __u64* f[] = {&r.sp, &r.flags, &r.ax, &r.orig_ax, &r.di, &r.r12, &r.bp};
             const char* n[] = {"sp", "flags", "ax", "orig_ax", "di", "r12", "bp"};
             const auto i = g.rng.below(7);
             *f[i] = g.rng.chance(50) ? g.rng.next() : *f[i] ^ (1ULL << g.rng.below(64));
             SAY("%s %#llx", n[i], (ull)*f[i]);
             return true;
         }},
        {"xstate-size",
         [](Gen& g) {
             auto& x = g.m.xstate;
             const u32 real = x.size;
             x.size =
                 g.rng.pick<u32>({0, 512, 575, 576, real - 8, real + 8, 65536, 65537, 0xffffffff});
             const bool resize = x.size <= 65536 && g.rng.chance(70);
             if (resize)
                 g.m.xsave.resize(x.size);
             SAY("xstate size %u (data %s)", x.size, resize ? "resized" : "unchanged");
             return true;
         }},
        {"xstate-header",
         [](Gen& g) {
             auto& xs = g.m.xsave;
             u64 v;
             switch (g.rng.below(5)) {
             case 0: // xstate_bv: a feature bit the CPU may lack
                 std::memcpy(&v, xs.data() + 512, 8);
                 v |= 1ULL << g.rng.pick<int>({2, 3, 5, 9, 17, 18, 30, 62, 63});
                 std::memcpy(xs.data() + 512, &v, 8);
                 SAY("xstate_bv %#llx", (ull)v);
                 g.machine("which FPU features the CPU has");
                 break;
             case 1:
                 v = 1ULL << g.rng.below(64);
                 std::memcpy(xs.data() + 520, &v, 8);
                 SAY("xcomp_bv %#llx", (ull)v);
                 break;
             case 2:
                 xs[528 + g.rng.below(48)] = std::byte{1};
                 g.say("XSAVE header reserved byte");
                 break;
             case 3:
                 g.m.xstate.__pad = 1;
                 g.say("xstate __pad");
                 break;
             default:
                 g.m.xstate.xfeatures = g.rng.next();
                 g.say("xfeatures field (informational)");
             }
             return true;
         }},
        {"xstate-mxcsr",
         [](Gen& g) {
             u32 mxcsr;
             std::memcpy(&mxcsr, g.m.xsave.data() + 24, 4);
             switch (g.rng.below(3)) {
             case 0:
                 mxcsr |= 1u << (16 + g.rng.below(16));
                 break;
             case 1:
                 mxcsr |= 0x40; // DAZ: refused by CPUs without it
                 g.machine("DAZ support");
                 break;
             default:
                 mxcsr ^= 1u << g.rng.below(6); // exception flags
             }
             std::memcpy(g.m.xsave.data() + 24, &mxcsr, 4);
             SAY("mxcsr %#x", mxcsr);
             return true;
         }},
        {"xstate-registers",
         [](Gen& g) {
             const auto at = 160 + g.rng.below(256); // xmm0-15
             g.m.xsave[at] ^= std::byte{0xff};
             SAY("xmm byte %llu", (ull)at);
             return true;
         }},
        {"signal-actions",
         [](Gen& g) {
             const int sig = 1 + static_cast<int>(g.rng.below(GHOST_NSIG));
             auto& a = g.m.signals.action[sig - 1];
             switch (g.rng.below(4)) {
             case 0:
                 a.flags |= 1ULL << g.rng.below(64);
                 SAY("signal %d flags %#llx", sig, (ull)a.flags);
                 break;
             case 1:
                 a.restorer = g.addr("restorer");
                 g.note_addr(a.restorer);
                 SAY("of signal %d", sig);
                 break;
             case 2:
                 g.m.signals.action[g.rng.chance(50) ? SIGKILL - 1 : SIGSTOP - 1].handler =
                     g.rng.pick<u64>({1, 0x401000});
                 g.say("SIGKILL or SIGSTOP caught");
                 break;
             default:
                 a.handler = g.rng.pick<u64>({0, 1, 0x1000, 0xffffffff81000000ULL});
                 a.mask = g.rng.next();
                 SAY("signal %d handler %#llx", sig, (ull)a.handler);
             }
             return true;
         }},
        {"signal-state",
         [](Gen& g) {
             auto& s = g.m.signals;
             switch (g.rng.below(5)) {
             case 0:
                 s.pending |= 1ULL << g.rng.below(64);
                 SAY("pending %#llx", (ull)s.pending);
                 break;
             case 1: // not SIGKILL nor SIGSTOP: see signal-kill-blocked
                 s.blocked = g.rng.next() & ~((1ULL << (SIGKILL - 1)) | (1ULL << (SIGSTOP - 1)));
                 SAY("blocked %#llx", (ull)s.blocked);
                 break;
             case 2:
                 s.altstack_flags = g.rng.pick<u32>({1, 2, 4, 0x80000000u, 0x80000001u});
                 SAY("altstack flags %#x", s.altstack_flags);
                 break;
             case 3:
                 s.altstack_sp = g.addr("altstack_sp");
                 g.note_addr(s.altstack_sp);
                 s.altstack_size = g.rng.pick<u64>({0, 1, s.altstack_size, ~0ULL});
                 break;
             default:
                 s.__pad = 1;
                 g.say("signals __pad");
             }
             return true;
         }},
        {"signal-kill-blocked",
         [](Gen& g) {
             // SIGUSR2 unblocked too: the workload's check then fails before
             // its raise(), whose rt_sigprocmask(2) would unblock SIGKILL.
             g.m.signals.blocked &= ~(1ULL << (SIGUSR2 - 1));
             g.m.signals.blocked |= g.rng.pick<u64>(
                 {1ULL << (SIGKILL - 1), (1ULL << (SIGKILL - 1)) | (1ULL << (SIGSTOP - 1))});
             SAY("blocked %#llx", (ull)g.m.signals.blocked);
             return true;
         },
         // Fixed: the kernel drops SIGKILL and SIGSTOP from the mask, as
         // rt_sigprocmask(2) does; the reader accepts such an image.
         nullptr, false},
        {"fs",
         [](Gen& g) {
             if (g.rng.chance(25)) {
                 g.m.umask = static_cast<u32>(g.rng.next());
                 SAY("umask %#x", g.m.umask);
                 return true;
             }
             g.m.cwd = g.path_value(true);
             SAY("cwd '%.40s' (%zu bytes)", g.m.cwd.c_str(), g.m.cwd.size());
             return true;
         }},
        {"creds",
         [](Gen& g) {
             if (!g.m.creds)
                 return false;
             auto& c = *g.m.creds;
             switch (g.rng.below(6)) {
             case 0: // valid: whether it is refused is the importer's rule
                 c.euid = c.fsuid = g.rng.pick<u32>({0, 1000, 65534});
                 g.machine("the credentials the importer may assume");
                 SAY("euid and fsuid %u", c.euid);
                 break;
             case 1:
                 c.cap_effective |= 1ULL << 63;
                 SAY("effective capability 63, not permitted");
                 break;
             case 2:
                 c.ngroups += 1 + static_cast<u32>(g.rng.below(3));
                 SAY("ngroups %u, %zu groups follow", c.ngroups, g.m.groups.size());
                 break;
             case 3:
                 c.securebits = g.rng.pick<u32>({0x100, 0x80000000});
                 SAY("securebits %#x", c.securebits);
                 break;
             case 4:
                 c.uid = ~0U;
                 SAY("uid -1");
                 break;
             default: // valid
                 g.m.groups.push_back(g.rng.pick<u32>({0, 12345, 65533}));
                 c.ngroups++;
                 g.machine("the credentials the importer may assume");
                 SAY("one more group, %u", g.m.groups.back());
                 break;
             }
             return true;
         }},
        {"rlimits",
         [](Gen& g) {
             const auto i = g.rng.below(GHOST_NRLIMITS);
             auto& r = g.m.rlimits.rlim[i];
             switch (g.rng.below(4)) {
             case 0:
                 r.cur = r.max == ~0ULL ? ~0ULL : r.max + 1 + g.rng.below(100);
                 if (r.max == ~0ULL)
                     r.max = 1000;
                 break;
             case 1: // RLIMIT_NOFILE's hard limit, around the kernel's bound
                 g.m.rlimits.rlim[7].max = g.rng.pick<u64>({1 << 20, (1 << 20) + 1, ~0ULL});
                 g.m.rlimits.rlim[7].cur = std::min<u64>(g.m.rlimits.rlim[7].cur, 1 << 20);
                 SAY("NOFILE max %llu", (ull)g.m.rlimits.rlim[7].max);
                 return true;
             case 2: // too few descriptors for the image's own
                 g.m.rlimits.rlim[7].cur = g.rng.pick<u64>({0, 3, 5});
                 SAY("NOFILE cur %llu", (ull)g.m.rlimits.rlim[7].cur);
                 return true;
             default:
                 r.cur = r.max = g.rng.pick<u64>({0, 1, 4096, 1 << 20});
             }
             SAY("limit %llu = {%llu, %llu}", (ull)i, (ull)r.cur, (ull)r.max);
             return true;
         }},
        {"mm-counts",
         [](Gen& g) {
             auto& n = g.m.mm.nr_vmas;
             n = g.rng.pick<u32>({0, n - 1, n + 1, 65536, 65537, 0xffffffff});
             SAY("nr_vmas %u", n);
             return true;
         }},
        {"mm-auxv",
         [](Gen& g) {
             auto& mm = g.m.mm;
             const u32 w =
                 g.rng.pick<u32>({0, 1, 2, mm.auxv_words - 1, mm.auxv_words + 2, 46, 48, 64, 66});
             const bool keep_null = g.rng.chance(70) && w >= 2 && w <= GHOST_AUXV_WORDS;
             if (keep_null) { // move the AT_NULL pair to the new end
                 for (u32 i = mm.auxv_words; i < w; i += 2) {
                     mm.auxv[i - 2] = 51 + i; // AT_* values unknown to the kernel
                     mm.auxv[i - 1] = i;
                 }
                 mm.auxv[w - 2] = 0;
                 mm.auxv[w - 1] = 0;
             }
             mm.auxv_words = w;
             SAY("auxv_words %u%s", w, keep_null ? " ending with AT_NULL" : "");
             g.note_auxv(w);
             return true;
         }},
        {"mm-fields",
         [](Gen& g) {
             auto& mm = g.m.mm;
             __u64* f[] = {&mm.start_code, &mm.end_code,  &mm.start_data,  &mm.end_data,
                           &mm.start_brk,  &mm.brk,       &mm.start_stack, &mm.arg_start,
                           &mm.arg_end,    &mm.env_start, &mm.env_end,     &mm.vdso};
             const char* n[] = {"start_code", "end_code",  "start_data",  "end_data",
                                "start_brk",  "brk",       "start_stack", "arg_start",
                                "arg_end",    "env_start", "env_end",     "vdso"};
             const auto i = g.rng.below(12);
             if (g.rng.chance(30)) {
                 *f[i] = 0x10000; // a user address outside every mapping
                 SAY("%s %#llx", n[i], (ull)*f[i]);
             } else {
                 *f[i] = g.addr(n[i]);
                 g.note_addr(*f[i]);
             }
             return true;
         }},
        {"mm-vdso",
         [](Gen& g) {
             auto& mm = g.m.mm;
             switch (g.rng.below(3)) {
             case 0:
                 mm.vdso_crc32c ^= 1u << g.rng.below(32);
                 SAY("vdso_crc32c %#x", mm.vdso_crc32c);
                 g.machine("the running kernel's vDSO");
                 break;
             case 1:
                 mm.vdso_size = g.rng.pick<u32>({0, 1, 4096, mm.vdso_size + 4096, 0x80000000});
                 SAY("vdso_size %u", mm.vdso_size);
                 break;
             default: // as a writer that does not record it
                 g.m.header.features &= ~GHOST_IMAGE_FEAT_VDSO_ID;
                 mm.vdso_size = mm.vdso_crc32c = 0;
                 g.say("no vDSO record");
             }
             return true;
         }},
        {"vma-range",
         [](Gen& g) {
             const auto k = g.rng.below(g.m.vmas.size());
             auto& v = g.m.vmas[k].rec;
             switch (g.rng.below(6)) {
             case 0:
                 v.start += g.rng.pick<u64>({1, 8, kPage, 2 * kPage});
                 break;
             case 1:
                 v.start -= g.rng.pick<u64>({8, kPage, 16 * kPage});
                 break;
             case 2:
                 v.end += g.rng.pick<u64>({8, kPage, 64 * kPage});
                 break;
             case 3:
                 v.end -= g.rng.pick<u64>({8, kPage});
                 break;
             case 4:
                 std::swap(v.start, v.end);
                 break;
             default:
                 v.end = g.rng.pick<u64>(
                     {kUserEnd, kUserEnd + kPage, 1ULL << 47, (1ULL << 56) - kPage, 1ULL << 56});
                 g.note_addr(v.end, true);
             }
             SAY("mapping %llu: %#llx-%#llx", (ull)k, (ull)v.start, (ull)v.end);
             return true;
         }},
        {"vma-prot-flags",
         [](Gen& g) {
             auto& v = g.any_vma().rec;
             if (g.rng.chance(40)) {
                 v.prot ^= 1u << g.rng.below(5);
                 SAY("mapping %#llx prot %#x", (ull)v.start, v.prot);
             } else {
                 v.flags ^= 1u << g.rng.below(8);
                 SAY("mapping %#llx flags %#x", (ull)v.start, v.flags);
             }
             return true;
         }},
        {"vma-nr-pages",
         [](Gen& g) {
             auto& v = g.any_vma().rec;
             const u64 size = (v.end - v.start) / kPage;
             v.nr_pages =
                 g.rng.pick<u64>({0, v.nr_pages + 1, v.nr_pages - 1, size, size + 1, ~0ULL});
             SAY("mapping %#llx nr_pages %llu of %llu", (ull)v.start, (ull)v.nr_pages, (ull)size);
             return true;
         }},
        {"vma-file",
         [](Gen& g) {
             img::Vma* v = g.file_vma();
             if (!v)
                 return false;
             switch (g.rng.below(4)) {
             case 0:
                 v->path = g.path_value(true);
                 v->rec.path_len = static_cast<u32>(v->path.size());
                 SAY("mapping %#llx path '%.40s'", (ull)v->rec.start, v->path.c_str());
                 break;
             case 1:
                 v->rec.path_len = g.rng.pick<u32>({0, 1, v->rec.path_len + 1, 4096});
                 SAY("mapping %#llx path_len %u", (ull)v->rec.start, v->rec.path_len);
                 break;
             case 2:
                 v->rec.pgoff = g.rng.pick<u64>({1ULL << 20, 1ULL << 40, (1ULL << 52) + 1, ~0ULL});
                 SAY("mapping %#llx pgoff %#llx", (ull)v->rec.start, (ull)v->rec.pgoff);
                 break;
             default: { // an anonymous mapping gets a path
                 auto& a = g.any_vma();
                 a.path = "/dev/zero";
                 a.rec.path_len = 9;
                 SAY("mapping %#llx gets a path", (ull)a.rec.start);
             }
             }
             return true;
         }},
        {"vma-list",
         [](Gen& g) {
             auto& vs = g.m.vmas;
             const auto k = g.rng.below(vs.size());
             switch (g.rng.below(4)) {
             case 0:
                 for (const auto& r : vs[k].runs)
                     for (u64 i = 0; i < r.nr_pages; i++)
                         g.ps.erase(r.addr + i * kPage);
                 vs.erase(vs.begin() + k);
                 if (g.rng.chance(70))
                     g.m.mm.nr_vmas--;
                 SAY("mapping %llu dropped (nr_vmas %u)", (ull)k, g.m.mm.nr_vmas);
                 break;
             case 1:
                 vs.insert(vs.begin() + k, vs[k]);
                 if (g.rng.chance(70))
                     g.m.mm.nr_vmas++;
                 SAY("mapping %llu twice", (ull)k);
                 break;
             case 2:
                 if (k + 1 >= vs.size())
                     return false;
                 std::swap(vs[k], vs[k + 1]);
                 SAY("mappings %llu and %llu swapped", (ull)k, (ull)k + 1);
                 break;
             default: { // a new anonymous mapping in a gap
                 for (std::size_t i = 0; i + 1 < vs.size(); i++) {
                     if (vs[i + 1].rec.start - vs[i].rec.end >= 4 * kPage) {
                         img::Vma n;
                         n.rec.start = vs[i].rec.end + kPage;
                         n.rec.end = n.rec.start + kPage;
                         n.rec.prot = PROT_READ | PROT_WRITE;
                         vs.insert(vs.begin() + i + 1, n);
                         g.m.mm.nr_vmas++;
                         SAY("new mapping at %#llx", (ull)n.rec.start);
                         return true;
                     }
                 }
                 return false;
             }
             }
             return true;
         }},
        {"run-address",
         [](Gen& g) {
             img::Vma* v = g.vma_with_runs();
             if (!v)
                 return false;
             auto& r = v->runs[g.rng.below(v->runs.size())];
             const u64 old = r.addr;
             switch (g.rng.below(5)) {
             case 0:
                 r.addr += g.rng.pick<u64>({1, 8});
                 break;
             case 1:
                 r.addr = v->rec.start - kPage;
                 break;
             case 2:
                 r.addr = v->rec.end - (g.rng.chance(50) ? 0 : (r.nr_pages - 1) * kPage);
                 break;
             case 3:
                 r.addr += kPage;
                 break;
             default:
                 r.addr -= kPage;
             }
             // The data is whatever the image holds at the new place (or zeros).
             SAY("run %#llx moved to %#llx in %#llx-%#llx", (ull)old, (ull)r.addr,
                 (ull)v->rec.start, (ull)v->rec.end);
             return true;
         }},
        {"run-size",
         [](Gen& g) {
             img::Vma* v = g.vma_with_runs();
             if (!v)
                 return false;
             auto& r = v->runs[g.rng.below(v->runs.size())];
             const bool grow = g.rng.chance(50) || r.nr_pages == 1;
             r.nr_pages = grow ? r.nr_pages + 1 : r.nr_pages - 1;
             if (g.rng.chance(50))
                 v->rec.nr_pages += grow ? 1 : -1ULL; // keep the total right
             SAY("run %#llx has %llu pages, mapping nr_pages %llu", (ull)r.addr, (ull)r.nr_pages,
                 (ull)v->rec.nr_pages);
             return true;
         }},
        {"run-list",
         [](Gen& g) {
             img::Vma* v = g.vma_with_runs();
             if (!v)
                 return false;
             auto& rs = v->runs;
             const auto k = g.rng.below(rs.size());
             switch (g.rng.below(4)) {
             case 0:
                 if (g.rng.chance(50))
                     v->rec.nr_pages -= rs[k].nr_pages;
                 rs.erase(rs.begin() + k);
                 SAY("run %llu of %#llx dropped", (ull)k, (ull)v->rec.start);
                 break;
             case 1:
                 rs.insert(rs.begin() + k, rs[k]);
                 v->rec.nr_pages += rs[k].nr_pages;
                 SAY("run %llu of %#llx twice", (ull)k, (ull)v->rec.start);
                 break;
             case 2:
                 if (rs[k].nr_pages < 2)
                     return false;
                 rs.insert(rs.begin() + k + 1,
                           img::PageRun{rs[k].addr + kPage, rs[k].nr_pages - 1, 0});
                 rs[k].nr_pages = 1;
                 SAY("run %llu of %#llx split (valid)", (ull)k, (ull)v->rec.start);
                 break;
             default:
                 if (k + 1 >= rs.size())
                     return false;
                 std::swap(rs[k], rs[k + 1]);
                 SAY("runs %llu and %llu of %#llx swapped", (ull)k, (ull)k + 1, (ull)v->rec.start);
             }
             return true;
         }},
        {
            "run-wraparound",
            [](Gen& g) {
                // A run whose nr_pages makes "addr + nr_pages" and "carried +
                // nr_pages" wrap around 2^64 to small numbers, and whose section
                // size wraps to match: each bound check that adds passes.
                // With c pages carried before it, nr_pages = 2^64 - c + 1 makes
                // both sums 1 and the section size data_offset - (c - 1) pages,
                // which extra zero padding before the data turns into a match.
                for (auto& v : g.m.vmas) {
                    for (std::size_t k = 0; k < v.runs.size(); k++) {
                        if (v.runs[k].nr_pages < 3)
                            continue;
                        // Split it so that at least 2 pages are carried before.
                        v.runs.insert(
                            v.runs.begin() + k + 1,
                            img::PageRun{v.runs[k].addr + 2 * kPage, v.runs[k].nr_pages - 2, 0});
                        v.runs[k].nr_pages = 2;
                        auto ps = pieces_of(g.m, g.ps);
                        // Find the second half's piece and rewrite it raw.
                        std::size_t at = 0;
                        for (; at < ps.size(); at++)
                            if (ps[at].type == GHOST_SEC_PAGES && ps[at].addr == v.runs[k + 1].addr)
                                break;
                        u64 carried_before = 0;
                        for (std::size_t i = 0; i <= k; i++)
                            carried_before += v.runs[i].nr_pages;
                        const u64 n = 0 - carried_before + 1;
                        Bytes before = build(g.m.header, {ps.begin(), ps.begin() + at}, false);
                        const u64 hdr_end =
                            before.size() + sizeof(ghost_section) + sizeof(ghost_pages);
                        const u64 pad = (kPage - hdr_end % kPage) % kPage;
                        const u32 data_offset = static_cast<u32>(sizeof(ghost_pages) + pad +
                                                                 (carried_before - 1) * kPage);
                        const auto rs = static_cast<std::uint16_t>(sizeof(ghost_pages));
                        const ghost_section sec{GHOST_SEC_PAGES, 0, rs, data_offset + n * kPage};
                        const ghost_pages p{v.runs[k + 1].addr, n, data_offset, 0};
                        auto add = [&](const auto& rec) {
                            const auto b = std::as_bytes(std::span(&rec, 1));
                            before.insert(before.end(), b.begin(), b.end());
                        };
                        add(sec);
                        add(p);
                        before.resize(before.size() + data_offset - sizeof(p));
                        // Whatever follows: a page of data and a valid END.
                        before.resize(before.size() + kPage, std::byte{0x5a});
                        img::Writer w;
                        w.bytes() = std::move(before);
                        w.end();
                        g.out = std::move(w.bytes());
                        SAY("run at %#llx with nr_pages %#llx, section size %llu", (ull)p.addr,
                            (ull)n, (ull)sec.size);
                        return true;
                    }
                }
                return false;
            },
            // Fixed: run bounds are compared by subtraction (was a WARN).
        },
        {
            "run-huge",
            [](Gen& g) {
                // A mapping in the gap below the mmap area with a run header
                // claiming all its pages, then one page and the end: the stream
                // is far too short for it.
                const u64 start = 1ULL << 44,
                          n = g.rng.pick<u64>({1ULL << 29, 1ULL << 30, 1ULL << 33});
                auto& vs = g.m.vmas;
                std::size_t k = 0;
                while (k < vs.size() && vs[k].rec.end <= start)
                    k++;
                if (k == vs.size() || vs[k].rec.start < start + n * kPage || k == 0)
                    return false;
                img::Vma v;
                v.rec.start = start;
                v.rec.end = start + n * kPage;
                v.rec.prot = PROT_READ | PROT_WRITE;
                v.rec.nr_pages = n;
                vs.insert(vs.begin() + k, v);
                g.m.mm.nr_vmas++;
                // Everything up to the new mapping's VMA section, then the run.
                auto ps = pieces_of(g.m, g.ps);
                std::size_t at = 0;
                for (; at < ps.size(); at++)
                    if (ps[at].type == GHOST_SEC_VMA &&
                        ps[at].payload.size() >= sizeof(ghost_vma) &&
                        std::memcmp(ps[at].payload.data(), &v.rec.start, 8) == 0)
                        break;
                img::Writer w;
                w.bytes() = build(g.m.header, {ps.begin(), ps.begin() + at + 1}, false);
                const auto sec_at = w.bytes().size();
                w.pages(start, Bytes(kPage, std::byte{0x5a}));
                auto& b = w.bytes();
                ghost_pages p;
                std::memcpy(&p, b.data() + sec_at + sizeof(ghost_section), sizeof(p));
                p.nr_pages = n;
                std::memcpy(b.data() + sec_at + sizeof(ghost_section), &p, sizeof(p));
                const u64 size = p.data_offset + n * kPage;
                std::memcpy(b.data() + sec_at + offsetof(ghost_section, size), &size, 8);
                w.end();
                g.out = std::move(w.bytes());
                SAY("mapping %#llx-%#llx with a run header of %llu pages and one page of data",
                    (ull)v.rec.start, (ull)v.rec.end, (ull)n);
                return true;
            },
            // Fixed: a run's arrays grow as its pages arrive (was a WARN).
        },
        {"page-data",
         [](Gen& g) {
             if (g.ps.empty())
                 return false;
             auto it = g.ps.begin();
             std::advance(it, g.rng.below(g.ps.size()));
             const auto at = g.rng.below(kPage);
             it->second[at] ^= std::byte{static_cast<unsigned char>(1 + g.rng.below(255))};
             SAY("byte %llu of page %#llx", (ull)at, (ull)it->first);
             return true;
         }},
        {"file-fd",
         [](Gen& g) {
             if (g.m.files.empty())
                 return false;
             auto& f = g.m.files[g.rng.below(g.m.files.size())].rec;
             const int old = f.fd;
             f.fd = g.rng.pick<int>({-1, 0, 2, 6, 7, 100, 1 << 20, (1 << 20) - 1, INT_MIN});
             SAY("fd %d renumbered %d", old, f.fd);
             return true;
         }},
        {"file-record",
         [](Gen& g) {
             if (g.m.files.empty())
                 return false;
             auto& file = g.m.files[g.rng.below(g.m.files.size())];
             auto& f = file.rec;
             switch (g.rng.below(6)) {
             case 5:
                 f.file_id = g.rng.pick<u64>({0, 1, 2, 3, 99, ~0ULL});
                 SAY("fd %d file_id %llu", f.fd, (ull)f.file_id);
                 break;
             case 0:
                 f.kind = g.rng.pick<u32>({0, 1, 2, 3});
                 SAY("fd %d kind %u", f.fd, f.kind);
                 break;
             case 1:
                 f.fd_flags = g.rng.pick<u32>({0, 1, 2, 0x80000000u});
                 SAY("fd %d fd_flags %#x", f.fd, f.fd_flags);
                 break;
             case 2:
                 f.flags ^= g.rng.pick<u32>({O_CREAT | O_TRUNC, O_WRONLY, O_RDWR, O_APPEND,
                                             O_DIRECTORY, O_PATH, O_NONBLOCK});
                 SAY("fd %d open flags %#x", f.fd, f.flags);
                 break;
             case 3:
                 f.mode = g.rng.pick<u32>({0, S_IFREG, S_IFDIR, S_IFIFO, S_IFCHR, S_IFSOCK});
                 SAY("fd %d mode %#o", f.fd, f.mode);
                 break;
             default:
                 f.pos = g.rng.pick<u64>({0, 1ULL << 40, 1ULL << 63, ~0ULL});
                 SAY("fd %d pos %#llx", f.fd, (ull)f.pos);
             }
             return true;
         }},
        {"file-path",
         [](Gen& g) {
             if (g.m.files.empty())
                 return false;
             auto& f = g.m.files[g.rng.below(g.m.files.size())];
             if (g.rng.chance(25)) {
                 f.rec.path_len = g.rng.pick<u32>({0, f.rec.path_len + 1, 4096});
                 SAY("fd %d path_len %u", f.rec.fd, f.rec.path_len);
                 return true;
             }
             f.path = g.path_value(true);
             f.rec.path_len = static_cast<u32>(f.path.size());
             SAY("fd %d (kind %u) path '%.40s'", f.rec.fd, f.rec.kind, f.path.c_str());
             return true;
         }},
        {"file-list",
         [](Gen& g) {
             auto& fs = g.m.files;
             const auto k = g.rng.below(fs.size() + 1);
             switch (g.rng.below(4)) {
             case 0:
                 if (k >= fs.size())
                     return false;
                 SAY("fd %d dropped", fs[k].rec.fd);
                 fs.erase(fs.begin() + k);
                 break;
             case 1:
                 if (k >= fs.size())
                     return false;
                 fs.insert(fs.begin() + k, fs[k]);
                 SAY("fd %d twice", fs[k].rec.fd);
                 break;
             case 2:
                 if (k + 1 >= fs.size())
                     return false;
                 std::swap(fs[k], fs[k + 1]);
                 SAY("fds %d and %d swapped", fs[k].rec.fd, fs[k + 1].rec.fd);
                 break;
             default: { // a new descriptor after the others
                 img::File f;
                 f.rec.fd = (fs.empty() ? 0 : fs.back().rec.fd) + 1 + g.rng.below(3);
                 const bool inherit = g.rng.chance(40);
                 f.rec.kind = inherit ? GHOST_FILE_INHERIT : GHOST_FILE_PATH;
                 f.rec.mode = inherit ? S_IFIFO : S_IFCHR;
                 f.rec.flags = O_RDWR;
                 f.path = inherit ? "pipe:[0]" : "/dev/null";
                 f.rec.path_len = static_cast<u32>(f.path.size());
                 SAY("new fd %d (%s)", f.rec.fd, f.path.c_str());
                 fs.push_back(f);
             }
             }
             return true;
         }},
        {"sections",
         [](Gen& g) {
             auto ps = pieces_of(g.m, g.ps);
             const auto k = g.rng.below(ps.size());
             switch (g.rng.below(5)) {
             case 0:
                 if (k + 1 >= ps.size())
                     return false;
                 SAY("sections %llu (%s) and %llu swapped", (ull)k,
                     std::string(img::section_name(ps[k].type)).c_str(), (ull)k + 1);
                 std::swap(ps[k], ps[k + 1]);
                 break;
             case 1:
                 SAY("section %llu (%s) twice", (ull)k,
                     std::string(img::section_name(ps[k].type)).c_str());
                 ps.insert(ps.begin() + k, ps[k]);
                 break;
             case 2:
                 SAY("section %llu (%s) dropped", (ull)k,
                     std::string(img::section_name(ps[k].type)).c_str());
                 ps.erase(ps.begin() + k);
                 break;
             case 3:
                 ps.insert(ps.begin() + k, Piece{g.rng.pick<u32>({0, 12, 99, GHOST_SEC_END}), 0,
                                                 Bytes(8 * g.rng.below(3))});
                 SAY("a section of type %u before section %llu", ps[k].type, (ull)k);
                 break;
             default:
                 ps[k].flags = 1u << g.rng.below(32);
                 SAY("section %llu (%s) flags %#x", (ull)k,
                     std::string(img::section_name(ps[k].type)).c_str(), ps[k].flags);
             }
             g.out = build(g.m.header, ps);
             return true;
         }},
        {"end",
         [](Gen& g) {
             g.out = encode_with(g.m, g.ps);
             auto& b = g.out;
             const auto end = b.size() - 32;
             switch (g.rng.below(5)) {
             case 0: {
                 const u64 at = end + g.rng.pick<u64>({8, 16, 1ULL << 40});
                 std::memcpy(b.data() + end + 24, &at, 8);
                 SAY("END says it is at byte %llu", (ull)at);
                 break;
             }
             case 1:
                 b[end + 20] = std::byte{1};
                 g.say("END __pad");
                 break;
             case 2:
                 b[end + 16 + g.rng.below(4)] ^= std::byte{0x10};
                 g.say("END checksum wrong");
                 break;
             case 3: {
                 const auto cut = g.rng.below(b.size());
                 b.resize(cut);
                 SAY("cut at byte %llu", (ull)cut);
                 break;
             }
             default:
                 b.resize(b.size() + 8 * (1 + g.rng.below(100)), std::byte{0xee});
                 g.say("bytes after END (valid: never read)");
             }
             return true;
         }},
        {"record-larger",
         [](Gen& g) {
             // A newer writer's record: 8 to 64 bytes more than this reader
             // knows, all zero (taken) or not (refused), before the tail.
             auto ps = pieces_of(g.m, g.ps);
             auto& p = ps[g.rng.below(ps.size())];
             if (p.type == GHOST_SEC_PAGES)
                 return false;
             const auto known = img::record_size(p.type, GHOST_IMAGE_VERSION);
             const auto more = 8 * (1 + g.rng.below(8));
             p.payload.insert(p.payload.begin() + static_cast<std::ptrdiff_t>(known), more,
                              std::byte{0});
             p.rec = static_cast<u32>(known + more);
             const bool dirty = g.rng.chance(50);
             if (dirty)
                 p.payload[known + g.rng.below(more)] = std::byte{0x40};
             SAY("%s record of %u bytes, tail %s", std::string(img::section_name(p.type)).c_str(),
                 p.rec, dirty ? "not zero" : "zero");
             g.out = build(g.m.header, ps);
             return true;
         }},
        {"section-unknown",
         [](Gen& g) {
             // A section of a type no reader knows yet: skippable (ignored) or
             // required (refused, naming the type), anywhere before END.
             auto ps = pieces_of(g.m, g.ps);
             const auto k = g.rng.below(ps.size() + 1);
             Piece u{g.rng.pick<u32>({0, 12, 13, 99, 0x8000, 0xffffffff}), 0,
                     Bytes(8 * g.rng.below(5) + g.rng.below(8), std::byte{0x77})};
             u.rec = static_cast<u32>(g.rng.below(u.payload.size() + 1));
             const bool skippable = g.rng.chance(60);
             if (skippable)
                 u.flags = GHOST_SECTION_SKIPPABLE;
             ps.insert(ps.begin() + static_cast<std::ptrdiff_t>(k), u);
             SAY("%s section of type %u, %llu bytes, before section %llu",
                 skippable ? "a skippable" : "a required", u.type, (ull)u.payload.size(), (ull)k);
             g.out = build(g.m.header, ps);
             return true;
         }},
        {"byte-flip",
         [](Gen& g) {
             // Unstructured: a byte of a record (not page data), checksum kept
             // right; the catch-all behind the structured classes.
             auto ps = pieces_of(g.m, g.ps);
             auto& p = ps[g.rng.below(ps.size())];
             std::size_t span =
                 p.type == GHOST_SEC_PAGES ? 0 : std::min<std::size_t>(p.payload.size(), 2200);
             if (!span)
                 return false;
             const auto at = g.rng.below(span);
             p.payload[at] ^= std::byte{static_cast<unsigned char>(1 << g.rng.below(8))};
             SAY("byte %llu of a %s record", (ull)at,
                 std::string(img::section_name(p.type)).c_str());
             g.note_record(p.type, p.payload);
             g.out = build(g.m.header, ps);
             return true;
         }},
    };
    return c;
}

// ---- what happened ----------------------------------------------------------------

enum class Fate {
    Rejected,
    AnsweredSame,      // restored, and the workload's state is as exported
    AnsweredDifferent, // restored, the workload answers but its state differs
    Died,              // restored, then died by a signal or exited
    KilledByKernel,    // SIGKILL we did not send: past the point of no return
    NoAnswer,          // restored, silent until killed
    Hung,              // the import itself did not finish
    ChildBroken,       // a rejected importer did not live on, or gave no reason
};

const char* fate_name(Fate f) {
    switch (f) {
    case Fate::Rejected:
        return "rejected";
    case Fate::AnsweredSame:
        return "restored, answered as before";
    case Fate::AnsweredDifferent:
        return "restored, answered differently";
    case Fate::Died:
        return "restored, then died";
    case Fate::KilledByKernel:
        return "killed past the point of no return";
    case Fate::NoAnswer:
        return "restored, no answer";
    case Fate::Hung:
        return "import hung";
    default:
        return "importer broken";
    }
}

struct Outcome {
    Fate fate = Fate::Hung;
    int err = 0;
    std::string reason;
    std::string detail; // answer, signal, exit status
};

struct StatusRecord {
    int err;
    char reason[GHOST_REASON_LEN];
};

// How a mutated image reaches the kernel: through a memory ghost, a file
// ghost, or a file ghost with GHOST_IMPORT_DIRECT (page data and checksum
// read past the point of no return).
enum class Via { Memory, File, Direct };

Outcome import_in_child(const Bytes& image, Via via, const std::string& expected,
                        int answer_ms = kAnswerTimeoutMs) {
    Outcome o;
    Pipes p;
    int st[2];
    auto g = ghost_holding(image, via != Via::Memory);
    if (!g || !p.make() || pipe2(st, O_CLOEXEC)) {
        o.fate = Fate::ChildBroken;
        o.detail = std::string("setting up the import failed: ") + strerror(errno);
        return o;
    }
    UniqueFd st_r(st[0]), st_w(st[1]);
    UniqueFd null(open("/dev/null", O_RDWR | O_CLOEXEC));
    const pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        arrange({{null.get(), 0},
                 {null.get(), 1},
                 {null.get(), 2},
                 {p.req_r.get(), kReqFd},
                 {p.rep_w.get(), kRepFd},
                 {g.get(), kGhostFd},
                 {st_w.get(), kStatusFd}});
        ghost_import im;
        ghost_restore_self_flags(kGhostFd, &im, via == Via::Direct ? GHOST_IMPORT_DIRECT : 0);
        StatusRecord s{errno, {}};
        std::memcpy(s.reason, im.reason, sizeof(s.reason));
        s.reason[sizeof(s.reason) - 1] = 0;
        _exit(::write(kStatusFd, &s, sizeof(s)) == sizeof(s) ? 0 : 3);
    }
    g.reset();
    p.req_r.reset();
    p.rep_w.reset();
    st_w.reset();
    if (pid < 0) {
        o.fate = Fate::ChildBroken;
        o.detail = "fork failed";
        return o;
    }

    // A rejection is reported on the status pipe; a restore closes it.
    if (!wait_readable(st_r.get(), kImportTimeoutMs)) {
        reap(pid, 0);
        o.fate = Fate::Hung;
        return o;
    }
    StatusRecord s{};
    if (::read(st_r.get(), &s, sizeof(s)) == sizeof(s)) {
        o.err = s.err;
        o.reason = s.reason;
        bool killed;
        const int status = reap(pid, 5000, &killed);
        if (killed || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || o.reason.empty()) {
            o.fate = Fate::ChildBroken;
            o.detail =
                o.reason.empty() ? "rejected without a reason" : "the importer did not live on";
        } else {
            o.fate = Fate::Rejected;
        }
        return o;
    }

    // Restored: ask the workload.
    if (::write(p.req_w.get(), "p", 1) != 1) {
        // Already gone; its status says how.
    }
    bool timeout, eof;
    const auto line = read_line(p.rep_r.get(), answer_ms, timeout, eof);
    if (!line.empty() && line.back() == '\n') {
        o.fate = line == expected ? Fate::AnsweredSame : Fate::AnsweredDifferent;
        o.detail = line.substr(0, line.size() - 1);
        reap(pid, 0);
        return o;
    }
    bool killed;
    const int status = reap(pid, timeout ? 0 : answer_ms, &killed);
    char d[64];
    if (killed) {
        o.fate = Fate::NoAnswer;
        snprintf(d, sizeof(d), "no answer in %d ms", answer_ms);
    } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
        o.fate = Fate::KilledByKernel;
        snprintf(d, sizeof(d), "SIGKILL");
    } else if (WIFSIGNALED(status)) {
        o.fate = Fate::Died;
        snprintf(d, sizeof(d), "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    } else {
        o.fate = Fate::Died;
        snprintf(d, sizeof(d), "exit %d", WEXITSTATUS(status));
    }
    o.detail = d;
    return o;
}

// ---- comparing the reader and the kernel -------------------------------------------

// A kernel refusal that depends on this machine, not on the image's form.
bool machine_refusal(const Outcome& o) {
    static const char* const machine[] = {"is not this kernel's",
                                          "FPU features this CPU lacks",
                                          "dynamically enabled FPU",
                                          "FPU state in the image is invalid",
                                          "no longer the same kind of file",
                                          "cannot seek",
                                          "cannot move the vDSO"};
    for (const char* m : machine)
        if (o.reason.find(m) != std::string::npos)
            return true;
    return o.err != EBADMSG && o.err != ENOMEM;
}

// Kernel behaviour known to differ from the reader, kept so that the test
// stays green while it is reported; anything else fails.
struct Known {
    const char* cls;
    const char* what;
    std::function<bool(bool reader_ok, const Outcome&)> match;
};

// None at the moment: the three found by this test (wrapping run bounds,
// allocations sized by a run header, SIGKILL left blocked) are fixed.
const std::vector<Known> kKnown = {};

enum class Verdict { Agree, Expected, Known, Disagree };

struct Judged {
    Verdict v;
    std::string why;
    const Known* known = nullptr;
};

// @refusal: the reader's reason, empty when it accepts. @direct: imported
// with GHOST_IMPORT_DIRECT, where a checksum that does not match can only
// kill the importer (before it runs), which is then the kernel's refusal;
// any other refusal of the reader must still be one before the point of no
// return. (An image the reader accepts may be killed past it either way: a
// mapping the kernel cannot make, say, counts as restored, then died.)
Judged judge(const std::string& cls, bool md, const std::string& refusal, const Outcome& o,
             bool direct) {
    const bool reader_ok = refusal.empty();
    for (const auto& k : kKnown)
        if (cls == k.cls && k.match(reader_ok, o))
            return {Verdict::Known, k.what, &k};
    if (direct && o.fate == Fate::KilledByKernel && !reader_ok)
        return refusal.find("checksum mismatch") != std::string::npos
                   ? Judged{Verdict::Agree, ""}
                   : Judged{Verdict::Disagree, "read direct, the kernel killed the importer "
                                               "where only a checksum mismatch may"};
    const bool restored = o.fate != Fate::Rejected;
    if (reader_ok && restored)
        return {Verdict::Agree, ""};
    if (!reader_ok && !restored)
        return o.err == ENOMEM ? Judged{Verdict::Disagree, "the kernel refused it with ENOMEM"}
                               : Judged{Verdict::Agree, ""};
    if (reader_ok && machine_refusal(o))
        return {Verdict::Agree, ""};
    if (md)
        return {Verdict::Expected, "machine-dependent"};
    return {Verdict::Disagree, reader_ok ? "the kernel refuses what the reader accepts"
                                         : "the kernel restores what the reader refuses"};
}

// ---- main -------------------------------------------------------------------------

int tap_n = 0, tap_failed = 0;

void tap(bool ok, const std::string& what) {
    ++tap_n;
    if (!ok)
        tap_failed++;
    printf("%s %d - %s\n", ok ? "ok" : "not ok", tap_n, what.c_str());
    fflush(stdout);
}

void diag(const std::string& s) {
    printf("# %s\n", s.c_str());
    fflush(stdout);
}

u64 env_u64(const char* name, u64 dflt) {
    const char* v = getenv(name);
    return v && *v ? strtoull(v, nullptr, 0) : dflt;
}

// Whether this kernel gives user space 56 address bits (5-level paging).
u64 kernel_user_end() {
    void* p = mmap(reinterpret_cast<void*>(1ULL << 50), kPage, PROT_READ,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED)
        return kUserEnd;
    munmap(p, kPage);
    return reinterpret_cast<u64>(p) == (1ULL << 50) ? (1ULL << 56) - kPage : kUserEnd;
}

// Mutated workloads crash by design, and the kernel reports a user-space
// fault as "traps: NAME[PID] general protection fault ...", which the VM
// harness cannot tell from a kernel oops. debug.exception-trace silences
// only those user-space reports (kernel faults still go through die()); it
// is restored on the way out.
class QuietUserFaults {
  public:
    QuietUserFaults() : old_(slurp(kPath)) {
        if (!old_.empty())
            write_file("0");
    }
    ~QuietUserFaults() {
        if (!old_.empty())
            write_file(old_);
    }
    QuietUserFaults(const QuietUserFaults&) = delete;
    QuietUserFaults& operator=(const QuietUserFaults&) = delete;

  private:
    static constexpr const char* kPath = "/proc/sys/debug/exception-trace";
    static void write_file(const std::string& v) {
        UniqueFd fd(open(kPath, O_WRONLY | O_CLOEXEC));
        if (fd && ::write(fd.get(), v.data(), v.size()) < 0)
            diag(std::string("cannot write ") + kPath + ": " + strerror(errno));
    }
    std::string old_;
};

struct ClassStats {
    int cases = 0, rejected = 0, restored = 0, broken = 0, disagree = 0, expected = 0, known = 0;
    int skipped_na = 0;
    int reader_only = 0, reader_accepted = 0; // classes with a kernel_bug
};

int run() {
    const u64 seed = env_u64("GHOST_MUTATE_SEED", 0x6768'6f73'746d'7574ULL);
    const int count = static_cast<int>(env_u64("GHOST_MUTATE_COUNT", 300));
    const bool verbose = env_u64("GHOST_MUTATE_VERBOSE", 0) != 0;
    const bool known_bugs = env_u64("GHOST_MUTATE_KNOWN_BUGS", 0) != 0;
    const char* only = getenv("GHOST_MUTATE_CLASS"); // one class, for work by hand
    const auto& cls = classes();
    const double t0 = now();
    signal(SIGPIPE, SIG_IGN);
    g_kernel_user_end = kernel_user_end();
    const QuietUserFaults quiet;

    printf("TAP version 13\n1..%zu\n", cls.size() + 7);
    diag("seed " + std::to_string(seed) + " (GHOST_MUTATE_SEED), " + std::to_string(count) +
         " images (GHOST_MUTATE_COUNT); user space ends at " +
         (g_kernel_user_end == kUserEnd ? "2^47-4096" : "2^56-4096 (5-level paging)"));

    // 1. the workload, exported
    Pipes wp;
    std::string first;
    pid_t pid = wp.make() ? start_workload(wp, &first) : -1;
    const bool started = pid > 0 && first.rfind("ok ", 0) == 0;
    Bytes image;
    std::string reason;
    if (started) {
        auto g = ghost_new();
        ghost_export e{};
        e.size = sizeof(e);
        e.flags = GHOST_EXPORT_KILL;
        const char* step = "";
        const bool target = ghost_export_target_open(&e, pid, &step) == 0;
        const int exported = target && g && plug(g.get(), GHOST_RES_MEMORY, -1)
                                 ? ioctl(g.get(), GHOST_IOC_EXPORT, &e)
                                 : -1;
        const int export_errno = errno;
        if (target)
            ghost_export_target_close(&e);
        errno = export_errno;
        if (exported == 0) {
            waitpid(pid, nullptr, 0);
            lseek(g.get(), 0, SEEK_SET);
            std::byte buf[65536];
            ssize_t n;
            while ((n = ::read(g.get(), buf, sizeof(buf))) > 0)
                image.insert(image.end(), buf, buf + n);
        } else {
            reason = e.reason[0] ? e.reason : strerror(errno);
            reap(pid, 0);
        }
    }
    tap(started && !image.empty(),
        "the workload answers and is exported (" + std::to_string(image.size()) + " bytes)" +
            (reason.empty() ? "" : ": " + reason) + (started ? "" : ": it did not start"));
    if (image.empty()) {
        for (std::size_t i = 0; i < cls.size() + 6; i++)
            tap(false, "not run: no image");
        return 1;
    }
    // "ok CRC 1" before the export; the restored workload's next is "ok CRC 2".
    const std::string expected = first.substr(0, first.rfind(' ')) + " 2\n";

    // 2. the reader accepts it; 3. encode() gives it back byte for byte
    PageStore base_pages;
    img::ReadOptions ro;
    ro.on_pages = [&](const img::Vma&, const img::PageRun& r,
                      std::span<const std::byte> d) -> ghost::Result<void> {
        for (u64 i = 0; i < r.nr_pages; i++)
            base_pages[r.addr + i * kPage] =
                Bytes(d.begin() + i * kPage, d.begin() + (i + 1) * kPage);
        return {};
    };
    auto base = img::read(image, ro);
    tap(bool(base), base ? "the reader accepts the kernel's image (" +
                               std::to_string(base->vmas.size()) + " mappings, " +
                               std::to_string(base->pages()) + " pages, " +
                               std::to_string(base->files.size()) + " files)"
                         : "the reader refuses the kernel's image: " + base.error().what());
    if (!base) {
        for (std::size_t i = 0; i < cls.size() + 5; i++)
            tap(false, "not run: the reader refuses the base image");
        return 1;
    }
    const Bytes again = encode_with(*base, base_pages);
    tap(again == image, "encode() gives the kernel's image back byte for byte");

    // 4. the base image, re-encoded, restores (memory and file resources)
    for (Via via : {Via::Memory, Via::File, Via::Direct}) {
        const auto o = import_in_child(again, via, expected, kBaseAnswerTimeoutMs);
        tap(o.fate == Fate::AnsweredSame, std::string("the unmutated image restores from a ") +
                                              (via == Via::Memory ? "memory ghost"
                                               : via == Via::File ? "file ghost"
                                                                  : "file ghost read direct") +
                                              " and the workload answers as before (" +
                                              fate_name(o.fate) +
                                              (o.detail.empty() ? "" : ": " + o.detail) +
                                              (o.reason.empty() ? "" : ": " + o.reason) + ")");
    }

    // 5. the same image in format version 1 (as ghost wrote it before): the
    // kernel still reads and restores it
    {
        const auto o = import_in_child(encode_with(as_version1(*base), base_pages), Via::Memory,
                                       expected, kBaseAnswerTimeoutMs);
        tap(o.fate == Fate::AnsweredSame,
            std::string("the image in format version 1 restores and the workload answers as "
                        "before (") +
                fate_name(o.fate) + (o.detail.empty() ? "" : ": " + o.detail) +
                (o.reason.empty() ? "" : ": " + o.reason) + ")");
    }

    // 6. mutations, round robin over the classes
    Rng rng{seed ? seed : 1};
    std::vector<ClassStats> stats(cls.size());
    std::map<Fate, int> fates;
    std::map<const Known*, int> known_seen;
    int made = 0;
    for (int i = 0; i < count; i++) {
        const std::size_t c = i % cls.size();
        if (only && *only && std::string_view(only) != cls[c].name)
            continue;
        Gen g{rng, *base, base_pages, {}, false, {}};
        bool ok = false;
        for (int tries = 0; tries < 8 && !ok; tries++) {
            g.m = *base;
            g.ps = base_pages;
            g.what.clear();
            g.md = false;
            g.out.clear();
            ok = cls[c].make(g);
        }
        if (!ok) {
            stats[c].skipped_na++;
            continue;
        }
        if (g.out.empty())
            g.out = encode_with(g.m, g.ps);
        made++;
        if (verbose) {
            printf("# %d [%s] %s ...\n", i, cls[c].name, g.what.c_str());
            fflush(stdout);
        }
        auto reader = img::read(g.out);
        if (cls[c].kernel_bug && !known_bugs) {
            stats[c].reader_only++;
            if (reader)
                stats[c].reader_accepted++;
            if (bool(reader) == cls[c].reader_refuses)
                printf("#%d [%s] %s\n#   reader: %s\n#   => the reader must %s it\n", i,
                       cls[c].name, g.what.c_str(),
                       reader ? "accepts" : reader.error().what().c_str(),
                       cls[c].reader_refuses ? "refuse" : "accept");
            continue;
        }
        g_unkillable.clear();
        // Every other one through a file, half of those read direct.
        const Via via = i % 2 == 0 ? Via::Memory : i % 4 == 1 ? Via::File : Via::Direct;
        auto o = import_in_child(g.out, via, expected);
        if (!g_unkillable.empty()) {
            o.fate = Fate::Hung;
            o.detail = g_unkillable;
        }
        const auto j =
            judge(cls[c].name, g.md, reader ? "" : reader.error().what(), o, via == Via::Direct);
        auto& s = stats[c];
        s.cases++;
        fates[o.fate]++;
        if (o.fate == Fate::Rejected)
            s.rejected++;
        else if ((o.fate == Fate::ChildBroken || o.fate == Fate::Hung) && j.v != Verdict::Known)
            s.broken++;
        else
            s.restored++;
        if (j.v == Verdict::Disagree)
            s.disagree++;
        if (j.v == Verdict::Expected)
            s.expected++;
        if (j.v == Verdict::Known) {
            s.known++;
            known_seen[j.known]++;
        }
        const bool loud = verbose || j.v == Verdict::Disagree || o.fate == Fate::ChildBroken ||
                          o.fate == Fate::Hung ||
                          (o.fate == Fate::KilledByKernel && j.v != Verdict::Agree);
        if (loud) {
            std::string line =
                "#" + std::to_string(i) + " [" + cls[c].name + "] " + g.what +
                "\n#   reader: " + (reader ? std::string("accepts") : reader.error().what()) +
                "\n#   kernel: " + fate_name(o.fate);
            if (o.fate == Fate::Rejected)
                line += " (" + std::string(strerrorname_np(o.err) ? strerrorname_np(o.err) : "?") +
                        ": " + o.reason + ")";
            if (!o.detail.empty())
                line += " (" + o.detail + ")";
            if (j.v != Verdict::Agree)
                line += "\n#   => " +
                        std::string(j.v == Verdict::Disagree ? "DISAGREEMENT: "
                                    : j.v == Verdict::Known  ? "known kernel issue: "
                                                             : "expected difference: ") +
                        j.why;
            printf("%s\n", line.c_str());
            fflush(stdout);
        }
    }

    for (std::size_t c = 0; c < cls.size(); c++) {
        const auto& s = stats[c];
        char line[600];
        if (s.reader_only) {
            const int wrong =
                cls[c].reader_refuses ? s.reader_accepted : s.reader_only - s.reader_accepted;
            if (wrong)
                snprintf(line, sizeof(line), "class %s: the reader %s %d of %d images", cls[c].name,
                         cls[c].reader_refuses ? "accepts" : "refuses", wrong, s.reader_only);
            else
                snprintf(line, sizeof(line),
                         "class %s: the reader %s all %d images; not imported # SKIP known "
                         "kernel bug (GHOST_MUTATE_KNOWN_BUGS=1 imports them): %s",
                         cls[c].name, cls[c].reader_refuses ? "refuses" : "accepts", s.reader_only,
                         cls[c].kernel_bug);
            tap(wrong == 0, line);
            continue;
        }
        if (!s.cases) {
            snprintf(line, sizeof(line), "class %s: no case # SKIP %s", cls[c].name,
                     s.skipped_na ? "nothing in the image it applies to"
                                  : "GHOST_MUTATE_COUNT too small");
            tap(true, line);
            continue;
        }
        snprintf(line, sizeof(line),
                 "class %s: %d images, %d rejected, %d restored; reader and kernel agree%s%s%s",
                 cls[c].name, s.cases, s.rejected, s.restored, s.disagree ? "" : " on all",
                 s.expected ? (" (" + std::to_string(s.expected) + " machine-dependent)").c_str()
                            : "",
                 s.known ? (" (" + std::to_string(s.known) + " known kernel issue)").c_str() : "");
        std::string l = line;
        if (s.disagree)
            l += " except " + std::to_string(s.disagree);
        if (s.broken)
            l += "; " + std::to_string(s.broken) + " imports hung or broke the importer";
        tap(!s.disagree && !s.broken, l);
    }

    // 6. the whole run
    std::string sum = std::to_string(made) + " mutated images:";
    for (const auto& [f, n] : fates)
        sum += " " + std::to_string(n) + " " + fate_name(f) + ",";
    sum.pop_back();
    char t[64];
    snprintf(t, sizeof(t), " (%.1f s)", now() - t0);
    const int rejected = fates[Fate::Rejected];
    int reader_only = 0;
    for (const auto& s : stats)
        reader_only += s.reader_only;
    made -= reader_only;
    // Sanity: a kernel that took everything would fail here.
    tap(made > 0 && (rejected * 3 > made || (only && *only)),
        sum + t + "; at least a third rejected (" + std::to_string(rejected) + ")");
    for (const auto& k : kKnown)
        if (known_seen.count(&k) || known_bugs)
            diag("known kernel issue seen " + std::to_string(known_seen[&k]) + " times: " + k.what);
    return tap_failed ? 1 : 0;
}

} // namespace

int main() {
    return run();
}
