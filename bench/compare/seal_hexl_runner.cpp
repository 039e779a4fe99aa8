// Microsoft SEAL built from source with Intel HEXL (AVX-512 / IFMA NTTs and element-wise
// kernels): the third column of the CKKS comparison. Built by bench/setup_compare.sh; run by
// seal_hexl_runner.py, which passes the parameters and the inputs and prints the JSON line.
//
//   seal_hexl_runner LOGN SCALE_BITS REPS INPUTS_FILE BITS...
//
// INPUTS_FILE holds 2·(N/2) little-endian doubles (x then y, the common inputs); BITS are the
// coefficient-modulus prime sizes, the special prime last (seal_runner.choose_bits). Prints
// one JSON object: timings in µs (median of REPS after 2 warm-up calls), precision in bits
// (−log2 of the largest slot error), sizes in bytes (uncompressed serialization), the
// primes' sizes and whether HEXL was compiled in. The same ops, in the same order and with
// the same arguments, as seal_runner.py (SEAL through tenseal's Python bindings).
#include <seal/seal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace seal;

static double median_us(const std::function<void()> &f, int reps) {
    for (int i = 0; i < 2; i++) f();
    std::vector<double> t;
    for (int i = 0; i < reps; i++) {
        auto a = std::chrono::steady_clock::now();
        f();
        auto b = std::chrono::steady_clock::now();
        t.push_back(std::chrono::duration<double, std::micro>(b - a).count());
    }
    std::sort(t.begin(), t.end());
    size_t m = t.size() / 2;
    return t.size() % 2 ? t[m] : 0.5 * (t[m - 1] + t[m]);
}

static double bits(const std::vector<double> &got, const std::vector<double> &want) {
    double err = 0;
    for (size_t i = 0; i < want.size(); i++) err = std::max(err, std::fabs(got[i] - want[i]));
    return err == 0 ? INFINITY : -std::log2(err);
}

static std::string num(double v) {
    if (!std::isfinite(v)) return "null";
    char b[64];
    std::snprintf(b, sizeof b, "%.2f", v);
    return b;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        std::cerr << "usage: seal_hexl_runner LOGN SCALE_BITS REPS INPUTS_FILE BITS...\n";
        return 2;
    }
    const size_t n = size_t(1) << std::stoi(argv[1]);
    const double scale = std::pow(2.0, std::stoi(argv[2]));
    const int reps = std::stoi(argv[3]);
    std::vector<int> prime_bits;
    for (int i = 5; i < argc; i++) prime_bits.push_back(std::stoi(argv[i]));
    const size_t slots = n / 2;
    std::vector<double> x(slots), y(slots);
    {
        std::ifstream f(argv[4], std::ios::binary);
        f.read(reinterpret_cast<char *>(x.data()), slots * sizeof(double));
        f.read(reinterpret_cast<char *>(y.data()), slots * sizeof(double));
        if (!f) {
            std::cerr << "seal_hexl_runner: could not read " << 2 * slots << " doubles\n";
            return 2;
        }
    }

    EncryptionParameters parms(scheme_type::ckks);
    parms.set_poly_modulus_degree(n);
    parms.set_coeff_modulus(CoeffModulus::Create(n, prime_bits));
    int total = 0;
    for (int b : prime_bits) total += b;
    sec_level_type sec = total <= CoeffModulus::MaxBitCount(n, sec_level_type::tc128)
                             ? sec_level_type::tc128
                             : sec_level_type::none;
    SEALContext ctx(parms, true, sec);
    if (!ctx.parameters_set()) {
        std::cerr << "seal_hexl_runner: " << ctx.parameter_error_message() << "\n";
        return 2;
    }
    auto top = ctx.first_parms_id();
    KeyGenerator keygen(ctx);
    PublicKey pk;
    keygen.create_public_key(pk);
    RelinKeys rlk;
    keygen.create_relin_keys(rlk);
    const uint32_t gal_rot = 3, gal_conj = uint32_t(2 * n - 1);
    GaloisKeys gk;
    keygen.create_galois_keys(std::vector<uint32_t>{gal_rot, gal_conj}, gk);
    CKKSEncoder encoder(ctx);
    Encryptor encryptor(ctx, pk);
    Decryptor decryptor(ctx, keygen.secret_key());
    Evaluator ev(ctx);

    auto dec = [&](const Ciphertext &ct) {
        Plaintext pt;
        decryptor.decrypt(ct, pt);
        std::vector<double> v;
        encoder.decode(pt, v);
        return v;
    };
    auto enc = [&](const std::vector<double> &v) {
        Plaintext pt;
        encoder.encode(v, top, scale, pt);
        Ciphertext ct;
        encryptor.encrypt(pt, ct);
        return ct;
    };
    std::vector<double> sum(slots), prod(slots), cx(slots), rot(slots);
    const double c = 0.7;  // common.MUL_CONST
    for (size_t i = 0; i < slots; i++) {
        sum[i] = x[i] + y[i];
        prod[i] = x[i] * y[i];
        cx[i] = c * x[i];
        rot[i] = x[(i + 1) % slots];
    }

    std::ostringstream T, P;
    auto t = [&](const char *k, double v) { T << (T.tellp() ? ", " : "") << '"' << k << "\": " << num(v); };
    auto p = [&](const char *k, double v) { P << (P.tellp() ? ", " : "") << '"' << k << "\": " << num(v); };

    Plaintext pt_x;
    t("encode", median_us([&] { encoder.encode(x, top, scale, pt_x); }, reps));
    std::vector<double> out_v;
    t("decode", median_us([&] { encoder.decode(pt_x, out_v); }, reps));
    encoder.decode(pt_x, out_v);
    p("encode_decode", bits(out_v, x));

    Ciphertext ct_x;
    t("encrypt", median_us([&] { encryptor.encrypt(pt_x, ct_x); }, reps));
    ct_x = enc(x);
    Ciphertext ct_y = enc(y);
    Plaintext pt_out;
    t("decrypt", median_us([&] { decryptor.decrypt(ct_x, pt_out); }, reps));
    p("encrypt_decrypt", bits(dec(ct_x), x));

    Ciphertext out;
    t("add", median_us([&] { ev.add(ct_x, ct_y, out); }, reps));
    ev.add(ct_x, ct_y, out);
    p("add", bits(dec(out), sum));

    Plaintext pt_y;
    encoder.encode(y, top, scale, pt_y);
    t("mul_plain", median_us([&] { ev.multiply_plain(ct_x, pt_y, out); }, reps));
    ev.multiply_plain(ct_x, pt_y, out);
    p("mul_plain", bits(dec(out), prod));

    Plaintext pt_c;  // as seal_runner.py: SEAL's scalar path is encode(double) + multiply_plain
    auto mul_const = [&] {
        encoder.encode(c, top, scale, pt_c);
        ev.multiply_plain(ct_x, pt_c, out);
    };
    t("mul_const", median_us(mul_const, reps));
    mul_const();
    p("mul_const", bits(dec(out), cx));

    auto mul_relin = [&] {
        ev.multiply(ct_x, ct_y, out);
        ev.relinearize_inplace(out, rlk);
    };
    t("mul_relin", median_us(mul_relin, reps));
    Ciphertext ct_xy;
    ev.multiply(ct_x, ct_y, ct_xy);
    ev.relinearize_inplace(ct_xy, rlk);
    p("mul_relin", bits(dec(ct_xy), prod));

    t("rescale", median_us([&] { ev.rescale_to_next(ct_xy, out); }, reps));
    ev.rescale_to_next(ct_xy, out);
    p("rescale", bits(dec(out), prod));

    t("rotate", median_us([&] { ev.rotate_vector(ct_x, 1, gk, out); }, reps));
    ev.rotate_vector(ct_x, 1, gk, out);
    p("rotate", bits(dec(out), rot));

    t("conjugate", median_us([&] { ev.complex_conjugate(ct_x, gk, out); }, reps));
    ev.complex_conjugate(ct_x, gk, out);
    p("conjugate", bits(dec(out), x));

    std::ostringstream s1, s2;
    ct_x.save(s1, compr_mode_type::none);
    GaloisKeys gk1;
    keygen.create_galois_keys(std::vector<uint32_t>{gal_rot}, gk1);
    gk1.save(s2, compr_mode_type::none);

    std::ostringstream primes;
    auto moduli = ctx.key_context_data()->parms().coeff_modulus();
    for (size_t i = 0; i < moduli.size(); i++) primes << (i ? ", " : "") << moduli[i].bit_count();
#ifdef SEAL_USE_INTEL_HEXL
    const bool hexl = true;
#else
    const bool hexl = false;
#endif
    std::cout << "{\"timings_us\": {" << T.str() << "}, \"precision_bits\": {" << P.str()
              << "}, \"sizes\": {\"ciphertext_bytes\": " << s1.str().size()
              << ", \"galois_key_bytes\": " << s2.str().size() << "}, \"prime_bits\": [" << primes.str()
              << "], \"hexl\": " << (hexl ? "true" : "false") << ", \"version\": \"" << SEAL_VERSION
              << "\"}" << std::endl;
    return 0;
}
