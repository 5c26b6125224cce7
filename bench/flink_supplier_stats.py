"""The Flink peer of the live supplier windows (`supplier-stats`), in PyFlink's Table API.

    python bench/flink_supplier_stats.py --bootstrap-servers ... --topic orders --registry-url http://... \
        --output-topic supplier-stats --parallelism 2 --report report.json

The seed lab computed them with the DataStream API: 5 s tumbling event-time windows per supplier
over `bid_time`, watermark 5 s behind the highest one seen. Flink's windowing table function does
the same here, and the records are the project's: key = supplier, a JSON value with the window's
UTC times as ISO text, the total price (DECIMAL(12,2)) and the count. The source is bounded at the
topic's end like the project's catch-up run; at that end Flink closes every window, where the
project's run leaves the last ones open for the orders still to come.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# The same folder's module (the peer imports nothing from the project): bench/flink_peer.py runs this file
# as a script, so bench/ is on its path; mypy checks the folder as the bench package.
if TYPE_CHECKING:
    from bench.flink_ingestion import SOURCE_COLUMNS, arguments, orders_source, run, with_options
else:
    from flink_ingestion import SOURCE_COLUMNS, arguments, orders_source, run, with_options


def main() -> None:
    args = arguments(__doc__, "output-topic")

    def statements(environment) -> str:
        source = orders_source(args, group=f"flink-peer-{args.output_topic}")
        environment.execute_sql(f"""
            CREATE TEMPORARY TABLE orders_source ({SOURCE_COLUMNS},
                WATERMARK FOR bid_time AS bid_time - INTERVAL '5' SECOND) WITH ({with_options(source)})""")
        sink = {
            "connector": "kafka",
            "topic": args.output_topic,
            "properties.bootstrap.servers": args.bootstrap_servers,
            "key.format": "raw",
            "key.fields": "supplier",
            "value.format": "json",
            "value.fields-include": "ALL",
            "value.json.encode.decimal-as-plain-number": "true",
        }
        environment.execute_sql(f"""
            CREATE TEMPORARY TABLE supplier_stats (
                window_start STRING, window_end STRING, supplier STRING, total_price DECIMAL(12, 2), `count` BIGINT
            ) WITH ({with_options(sink)})""")
        iso = "yyyy-MM-dd''T''HH:mm:ss''Z''"
        return f"""
            INSERT INTO supplier_stats
            SELECT DATE_FORMAT(window_start, '{iso}'), DATE_FORMAT(window_end, '{iso}'), supplier,
                   CAST(SUM(CAST(price AS DECIMAL(10, 2))) AS DECIMAL(12, 2)), COUNT(*)
            FROM TABLE(TUMBLE(TABLE orders_source, DESCRIPTOR(bid_time), INTERVAL '5' SECOND))
            GROUP BY window_start, window_end, supplier"""

    run(args, statements)


if __name__ == "__main__":
    main()
