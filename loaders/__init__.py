"""Offline and online loading: split, MySQL bulk load, chunked HDFS copy, dist_ch, gen_HF."""
