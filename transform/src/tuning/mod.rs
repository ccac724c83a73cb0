//! Tuning: which configuration wins. A sweep's spec and run order ([`spec`]) and its record
//! ([`record`]), the table of environment knobs the libraries read ([`knob_table`]), the
//! report over any dataset with its noise verdict ([`sweep_report`], [`verdict`]), TP overlap
//! measured operator by operator inside named windows of the traces ([`tp_windows`]), and the
//! TP scaling check of the Megatron TP overlap tuner ([`tp_scaling`], [`tp_report`]).

pub mod knob_table;
pub mod record;
pub mod spec;
pub mod sweep_report;
pub mod tp_report;
pub mod tp_scaling;
pub mod tp_windows;
pub mod verdict;
