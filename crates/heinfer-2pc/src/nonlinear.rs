//! One non-linear step of GAZELLE's protocol (§4): additive shares mod `p` in, the layer's
//! circuit garbled by the server and evaluated by the client, fresh shares out.
//!
//! ```text
//!   client (evaluator, OT receiver)                  server (garbler, OT sender)
//! session setup, once:
//!   ClientSession::new              ── base OT ──▶   ServerSession::new
//!   ClientSession::finish_setup     ◀── base OT ──
//! offline, per step (no data yet):
//!   ClientSession::offline          ── OT ext ───▶   ServerSession::offline: draws the masks r,
//!                                                    garbles n circuits with its shares, draws
//!                                                    the output shares ρ (gc::arith)
//!   ClientStep::receive_offline     ◀── τ, garbled tables, server's labels, output table ──
//! online:
//!   (the server adds r to Enc(x) and sends it; the client decrypts c = x + r mod p)
//!   ClientStep::choose(c)           ── d = b ⊕ c' ▶  ServerStep::labels
//!   ClientStep::finish → z          ◀── labels ───
//!   (the client encrypts z = y − ρ; the server adds its share ρ: Enc(layer(x)))
//! ```
//!
//! The client's share `c = x + r` is uniform to it (fresh `r` from the OS per value); its
//! output `z = y − ρ mod p` is uniform too (the circuit's output bits are never decoded); the
//! server sees only OT messages. Semi-honest security, as GAZELLE's.

use rand_core::{CryptoRng, RngCore};
use zeroize::Zeroize;

use crate::gc::arith::{decode_outputs, garble_outputs, OutputTable};
use crate::gc::layers::LayerCircuit;
use crate::gc::{evaluate_labels, garble, GarbledBatch};
use crate::ot::{ChosenOtReceiver, ChosenOtSender, IknpReceiver, IknpSender, PendingCorrelated};
use crate::rng::uniform_mod;
use crate::{Result, TwoPartyError};

/// Most instances of one step (each costs about 4 KB at 20 bits).
pub const MAX_INSTANCES: usize = 1 << 20;

/// The client's half of a session: the OT extension receiver.
pub struct ClientSession {
    ot: IknpReceiver,
}

/// The server's half of a session: the OT extension sender.
pub struct ServerSession {
    ot: IknpSender,
}

impl ClientSession {
    /// Starts the session; the message goes to [`ServerSession::new`].
    pub fn new<R: CryptoRng>(rng: &mut R) -> Result<(ClientSession, Vec<u8>)> {
        let (ot, msg) = IknpReceiver::new(rng)?;
        Ok((ClientSession { ot }, msg))
    }

    /// Completes the set-up with the server's reply.
    pub fn finish_setup(&mut self, msg: &[u8]) -> Result<()> {
        self.ot.receive_setup(msg)
    }

    /// The offline request of a step of `instances` copies of `layer`.
    pub fn offline<R: CryptoRng>(
        &mut self,
        layer: &LayerCircuit,
        instances: usize,
        rng: &mut R,
    ) -> Result<(ClientStep, Vec<u8>)> {
        check_instances(instances)?;
        let ots = instances * layer.circuit.evaluator_inputs.len();
        let (pending, msg) = self.ot.extend_correlated(ots, rng)?;
        Ok((
            ClientStep {
                layer: layer.clone(),
                instances,
                state: ClientState::Offline(pending),
            },
            msg,
        ))
    }
}

impl ServerSession {
    /// Answers the client's set-up message; the reply goes to [`ClientSession::finish_setup`].
    pub fn new<R: CryptoRng>(msg: &[u8], rng: &mut R) -> Result<(ServerSession, Vec<u8>)> {
        let mut ot = IknpSender::new(rng)?;
        let reply = ot.receive_setup(msg, rng)?;
        Ok((ServerSession { ot }, reply))
    }

    /// The offline phase of a step of `instances` copies of `layer`: draws the masks, garbles,
    /// answers the OT extension. The reply goes to [`ClientStep::receive_offline`].
    pub fn offline<R: CryptoRng + RngCore>(
        &mut self,
        layer: &LayerCircuit,
        instances: usize,
        msg: &[u8],
        rng: &mut R,
    ) -> Result<(ServerStep, Vec<u8>)> {
        self.offline_with_sources(layer, instances, None, msg, rng)
    }

    /// [`offline`](Self::offline) for circuits whose inputs may read the same value:
    /// `sources[i]` is the value circuit input `i` reads (`instances × arity` entries,
    /// instance-major; `None`: every input its own value). One mask is drawn per value, so
    /// inputs that read one value (overlapping pooling windows, a padded window's repeated
    /// entry) get the same mask and the client's one share of that value serves all of them.
    /// Values are numbered from 0, each below the number of inputs; errors name a `sources`
    /// of the wrong length or a value out of that range.
    pub fn offline_with_sources<R: CryptoRng + RngCore>(
        &mut self,
        layer: &LayerCircuit,
        instances: usize,
        sources: Option<&[u32]>,
        msg: &[u8],
        rng: &mut R,
    ) -> Result<(ServerStep, Vec<u8>)> {
        let (step, reply) = self.offline_reply(layer, instances, sources, msg, rng)?;
        Ok((step, reply.to_bytes()))
    }

    /// [`offline_with_sources`](Self::offline_with_sources) with the reply not yet written:
    /// the caller writes it once where it goes ([`OfflineReply::write_to`]), e.g. straight
    /// into the bindings' message object (its garbled tables are most of the offline bytes).
    pub fn offline_reply<R: CryptoRng + RngCore>(
        &mut self,
        layer: &LayerCircuit,
        instances: usize,
        sources: Option<&[u32]>,
        msg: &[u8],
        rng: &mut R,
    ) -> Result<(ServerStep, OfflineReply)> {
        check_instances(instances)?;
        let p = layer.p;
        let k = layer.arity();
        let r: Vec<u64> = match sources {
            None => (0..instances * k).map(|_| uniform_mod(rng, p)).collect(),
            Some(src) => {
                if src.len() != instances * k {
                    return Err(TwoPartyError::InvalidArgument(format!(
                        "{} sources for {instances} instances of {k} inputs",
                        src.len()
                    )));
                }
                if let Some(&v) = src.iter().find(|&&v| v as usize >= src.len()) {
                    return Err(TwoPartyError::InvalidArgument(format!(
                        "source {v} of {} inputs: values are numbered below the inputs' count",
                        src.len()
                    )));
                }
                let mut by_value = vec![None; src.len()];
                let r: Vec<u64> = src
                    .iter()
                    .map(|&v| *by_value[v as usize].get_or_insert_with(|| uniform_mod(rng, p)))
                    .collect();
                for m in by_value.iter_mut().flatten() {
                    m.zeroize();
                }
                r
            }
        };
        // the client's request is checked before the garbling it asks for
        let transfers = instances
            .checked_mul(layer.circuit.evaluator_inputs.len())
            .ok_or_else(|| TwoPartyError::InvalidArgument("too many instances".into()))?;
        self.ot.check_correlated(msg, transfers)?;
        let mut s: Vec<u64> = r.iter().map(|&v| (p - v) % p).collect();
        let garbled = garble(&layer.circuit, instances, &layer.garbler_bits(&s)?, rng);
        s.zeroize();
        let (batch, mut secrets) = garbled?;
        let (table, rho) = garble_outputs(
            &secrets.output_zero_labels,
            secrets.delta,
            layer.output_bits(),
            p,
            rng,
        )?;
        let off = layer.output_offset();
        let out_shares = rho.iter().map(|&v| (v + p - off) % p).collect();
        let (ot, tau) = self.ot.extend_correlated(msg, secrets.delta)?;
        if ot.len() != secrets.evaluator_zero_labels.len() {
            return Err(TwoPartyError::Protocol(format!(
                "the client asked for {} oblivious transfers, the step needs {}",
                ot.len(),
                secrets.evaluator_zero_labels.len()
            )));
        }
        let reply = OfflineReply {
            tau,
            garbled: batch.without_decoding(),
            table: table.to_bytes(p),
        };
        let step = ServerStep {
            r,
            out_shares,
            // moved, not copied (the secrets are wiped when dropped; this vector goes with the step)
            labels: std::mem::take(&mut secrets.evaluator_zero_labels),
            delta: secrets.delta,
            ot: Some(ChosenOtSender::from_correlated(ot)),
        };
        Ok((step, reply))
    }
}

/// The server's offline reply of one step before it is written: the OT-extension answer, the
/// garbled circuits (without decoding bits) and the output table, as
/// `len(τ) ‖ τ ‖ len(garbled) ‖ garbled ‖ table` (lengths u64 little-endian).
pub struct OfflineReply {
    tau: Vec<u8>,
    garbled: GarbledBatch,
    table: Vec<u8>,
}

impl OfflineReply {
    /// Length of the written reply in bytes.
    pub fn byte_len(&self) -> usize {
        16 + self.tau.len() + self.garbled.byte_len() + self.table.len()
    }

    /// Writes the reply to `out` (a `Vec<u8>`, or a `&mut [u8]` of [`Self::byte_len`] bytes;
    /// an error only if a slice is shorter).
    pub fn write_to<W: std::io::Write>(&self, out: &mut W) -> std::io::Result<()> {
        out.write_all(&(self.tau.len() as u64).to_le_bytes())?;
        out.write_all(&self.tau)?;
        out.write_all(&(self.garbled.byte_len() as u64).to_le_bytes())?;
        self.garbled.write_to(out)?;
        out.write_all(&self.table)
    }

    /// The reply as one buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.byte_len());
        self.write_to(&mut out).expect("a Vec takes every write");
        out
    }
}

fn check_instances(n: usize) -> Result<()> {
    if n == 0 || n > MAX_INSTANCES {
        return Err(TwoPartyError::InvalidArgument(format!(
            "{n} instances in one step (allowed 1..={MAX_INSTANCES})"
        )));
    }
    Ok(())
}

/// `(part, rest)` of `msg = len (u64 LE) ‖ part ‖ rest`; the reason when `msg` is too short.
fn split_prefixed<'a>(
    msg: &'a [u8],
    what: &str,
) -> std::result::Result<(&'a [u8], &'a [u8]), String> {
    if msg.len() < 8 {
        return Err(format!("no {what}: shorter than its length"));
    }
    let len = u64::from_le_bytes(msg[..8].try_into().expect("8 bytes"));
    if len > (msg.len() - 8) as u64 {
        return Err(format!(
            "declares {len} bytes of {what}, holds {}",
            msg.len() - 8
        ));
    }
    Ok(msg[8..].split_at(len as usize))
}

/// The server's side of one step: its masks and the OT sender of the client's labels.
pub struct ServerStep {
    r: Vec<u64>,
    out_shares: Vec<u64>,
    labels: Vec<crate::Block>,
    delta: crate::Block,
    ot: Option<ChosenOtSender>,
}

impl ServerStep {
    /// The masks `r` the server adds to the encrypted values before sending them (one per
    /// input value, instance-major): the client decrypts its share `c = x + r mod p`.
    pub fn masks(&self) -> &[u64] {
        &self.r
    }

    /// The server's shares of the outputs (`ρ`, less the layer's output offset): added to the
    /// client's encrypted shares.
    pub fn output_shares(&self) -> Vec<u64> {
        self.out_shares.clone()
    }

    /// Answers the client's OT choices with its input labels (16 bytes per bit).
    pub fn labels(&mut self, msg: &[u8]) -> Result<Vec<u8>> {
        let ot = self
            .ot
            .as_mut()
            .ok_or_else(|| TwoPartyError::Protocol("the step's labels were already sent".into()))?;
        let reply = ot.send_labels(msg, &self.labels, self.delta)?;
        self.ot = None;
        for b in &mut self.labels {
            b.0.zeroize();
        }
        Ok(reply)
    }
}

impl Drop for ServerStep {
    fn drop(&mut self) {
        self.r.zeroize();
        self.out_shares.zeroize();
        self.delta.0.zeroize();
        for b in &mut self.labels {
            b.0.zeroize();
        }
    }
}

enum ClientState {
    Offline(PendingCorrelated),
    Ready(Box<(GarbledBatch, OutputTable)>, ChosenOtReceiver),
    Chosen(Box<(GarbledBatch, OutputTable)>, ChosenOtReceiver),
    Done,
}

/// The client's side of one step.
pub struct ClientStep {
    layer: LayerCircuit,
    instances: usize,
    state: ClientState,
}

impl ClientStep {
    /// Takes the server's offline reply (OT corrections and the garbled circuits).
    pub fn receive_offline(&mut self, msg: &[u8]) -> Result<()> {
        let ClientState::Offline(pending) = &mut self.state else {
            return Err(TwoPartyError::Protocol(
                "the step's offline reply arrived twice".into(),
            ));
        };
        let bad = |reason: String| TwoPartyError::Deserialize {
            what: "offline reply",
            reason,
        };
        let (tau, rest) = split_prefixed(msg, "OT corrections").map_err(bad)?;
        let (garbled, table) = split_prefixed(rest, "garbled circuits").map_err(bad)?;
        let batch = GarbledBatch::from_bytes_without_decoding(
            garbled,
            &self.layer.circuit,
            self.instances,
        )?;
        if batch.instances != self.instances {
            return Err(bad(format!(
                "{} garbled instances, the step has {}",
                batch.instances, self.instances
            )));
        }
        let table = OutputTable::from_bytes(
            table,
            self.instances,
            self.layer.output_bits(),
            self.layer.p,
        )?;
        let ot = pending.finish(tau)?;
        self.state = ClientState::Ready(
            Box::new((batch, table)),
            ChosenOtReceiver::from_correlated(ot),
        );
        Ok(())
    }

    /// The OT choices for the client's shares `c` (`instances × arity` values below `p`).
    pub fn choose(&mut self, c: &[u64]) -> Result<Vec<u8>> {
        if c.len() != self.instances * self.layer.arity() {
            return Err(TwoPartyError::InvalidArgument(format!(
                "{} shares for {} instances of {} values",
                c.len(),
                self.instances,
                self.layer.arity()
            )));
        }
        let bits = self.layer.evaluator_bits(c)?;
        let state = std::mem::replace(&mut self.state, ClientState::Done);
        let ClientState::Ready(batch, mut ot) = state else {
            self.state = state;
            return Err(TwoPartyError::Protocol(
                "choices before the offline phase, or twice".into(),
            ));
        };
        match ot.choose(&bits) {
            Ok(msg) => {
                self.state = ClientState::Chosen(batch, ot);
                Ok(msg)
            }
            Err(e) => {
                self.state = ClientState::Ready(batch, ot);
                Err(e)
            }
        }
    }

    /// Receives the labels, evaluates the circuits and returns the client's new shares `z`.
    pub fn finish(&mut self, msg: &[u8]) -> Result<Vec<u64>> {
        let ClientState::Chosen(batch, ot) = &mut self.state else {
            return Err(TwoPartyError::Protocol(
                "labels before the choices, or twice".into(),
            ));
        };
        let labels = ot.receive(msg)?;
        let (batch, table) = &**batch;
        let out = evaluate_labels(&self.layer.circuit, batch, &labels)?;
        let z = decode_outputs(&out, table, self.layer.p)?;
        self.state = ClientState::Done;
        Ok(z)
    }
}
