//! Conversions between the axis-based representation and device-array formats (XLA HLO
//! shardings, MindSpore tensor layouts). Both rest on one idea: split each mesh axis into the
//! coarsest pieces such that every axis reference in play is a run of whole pieces; the pieces,
//! in mesh order, are then an iota reshape of the device list (`pieces.rs`).

pub mod hlo;
pub mod mindspore;
pub mod pieces;
